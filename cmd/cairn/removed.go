package main

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// commitPolicyNow says what decides a group commit now, for the warnings
// about the keys it replaced.
const commitPolicyNow = "a group commit now waits, up to store.commit_wait, only while other sensors that have sent recently may join it, and never for a publisher that waits for its PUBACKs (docs/raspberry-pi.md#sd-card-writes); remove the key"

// Warnings returns what the configuration sets that cairn accepts but no
// longer uses: keys of an earlier release, each named with its line and
// what replaced it. A gateway upgraded with its old file keeps running.
func (c *Config) Warnings() []string {
	var out []string
	for _, k := range []struct {
		key  string
		line int
	}{
		{"store.commit_interval", c.Store.OldCommitInterval.Line},
		{"store.commit_linger", c.Store.OldCommitLinger.Line},
		{"store.commit_wait_readings", c.Store.OldCommitWaitReadings.Line},
	} {
		if k.line > 0 {
			out = append(out, fmt.Sprintf("%s (line %d): no longer used: %s", k.key, k.line, commitPolicyNow))
		}
	}
	return out
}

// forgetRemoved clears the keys of s that are accepted but no longer used.
func (s *StoreConfig) forgetRemoved() {
	s.OldCommitInterval, s.OldCommitLinger, s.OldCommitWaitReadings = yaml.Node{}, yaml.Node{}, yaml.Node{}
}
