package main

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/uplink"
)

// Backlog is uplink.max_backlog: how much an upstream may hold back, an
// age of its oldest unsent reading ("7d", "36h") or the size of the log
// it holds ("500MB", "2GiB"); "0" or unset: no limit.
type Backlog struct {
	Age   Duration
	Bytes ByteSize
}

// UnmarshalYAML decodes a Backlog.
func (b *Backlog) UnmarshalYAML(n *yaml.Node) error {
	*b = Backlog{}
	if n.Kind == yaml.ScalarNode {
		if s, err := parseByteSize(n.Value); err == nil && s >= 0 {
			b.Bytes = s
			return nil
		}
		if d, err := parseDuration(n.Value); err == nil && d >= 0 {
			b.Age = Duration(d)
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot use %q as a backlog (want an age such as 7d or 36h, or a size such as 500MB or 2GiB)", n.Line, n.Value)}}
}

func (b Backlog) String() string {
	if b.Bytes > 0 {
		return b.Bytes.String()
	}
	return b.Age.String()
}

// catchUpOptions checks uplink.catch_up, max_backlog and backlog_policy,
// and returns what they ask of the uplink.
func catchUpOptions(u UplinkConfig, bad func(key, format string, a ...any)) (uplink.CatchUp, buffer.BacklogLimit) {
	catchUp, err := uplink.ParseCatchUp(u.CatchUp)
	if err != nil {
		bad("uplink.catch_up", "%v", err)
	}
	limit := buffer.BacklogLimit{MaxAge: time.Duration(u.MaxBacklog.Age), MaxBytes: int64(u.MaxBacklog.Bytes)}
	switch u.BacklogPolicy {
	case "none", "":
		if limit != (buffer.BacklogLimit{}) {
			bad("uplink.max_backlog", "%s drops nothing unless uplink.backlog_policy is drop_oldest (with none, the default, the disk cap retention.max_disk_bytes governs)", u.MaxBacklog)
		}
		return catchUp, buffer.BacklogLimit{}
	case "drop_oldest":
		if limit == (buffer.BacklogLimit{}) {
			bad("uplink.backlog_policy", "drop_oldest needs uplink.max_backlog: an age such as 7d or a size such as 500MB")
		}
	default:
		bad("uplink.backlog_policy", "want none or drop_oldest (got %q)", u.BacklogPolicy)
	}
	if limit.MaxBytes > 0 && limit.MaxBytes < 1<<20 {
		bad("uplink.max_backlog", "a size must be at least 1MiB (got %s)", u.MaxBacklog)
	}
	if limit.MaxAge > 0 && limit.MaxAge < time.Minute {
		bad("uplink.max_backlog", "an age must be at least 1m (got %s)", u.MaxBacklog)
	}
	return catchUp, limit
}
