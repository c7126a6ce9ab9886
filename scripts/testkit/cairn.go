package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LocalConfig starts a cairn configuration for a test: the embedded broker
// and the HTTP API on ports picked at each start, the data in %DATA%
// (WriteConfig). A test appends the sections it needs.
const LocalConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
http:
  listen: "127.0.0.1:0"
`

// WriteConfig writes yaml, with %DATA% replaced by dataDir, to a config
// file in a new temporary directory and returns its path.
func WriteConfig(t testing.TB, dataDir, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cairn.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "%DATA%", dataDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartedMsg is in the line `cairn run` logs once it serves: the store is
// open and the broker and the HTTP API listen.
const StartedMsg = `msg="cairn started"`

// Started is what the "cairn started" line says.
type Started struct {
	MQTT, HTTP string // listen addresses (host:port)
	Readings   uint64 // readings in the store
}

var (
	startedAddrRE     = regexp.MustCompile(`\b(mqtt|http)=(\S+)`)
	startedReadingsRE = regexp.MustCompile(`\breadings=(\d+)`)
)

// ParseStarted reads the addresses and the count of readings of a "cairn
// started" line.
func ParseStarted(line string) (Started, error) {
	var s Started
	for _, m := range startedAddrRE.FindAllStringSubmatch(line, -1) {
		switch m[1] {
		case "mqtt":
			s.MQTT = strings.TrimPrefix(m[2], "tcp://")
		case "http":
			s.HTTP = m[2]
		}
	}
	m := startedReadingsRE.FindStringSubmatch(line)
	if s.MQTT == "" || s.HTTP == "" || m == nil {
		return s, fmt.Errorf("no mqtt=, http= and readings= in %q", line)
	}
	var err error
	if s.Readings, err = strconv.ParseUint(m[1], 10, 64); err != nil {
		return s, fmt.Errorf("readings= in %q: %w", line, err)
	}
	return s, nil
}

// Cairn is a `cairn run` process that has started.
type Cairn struct {
	*Process
	Started
	StartTime time.Duration // from starting the process to its "cairn started" line
}

// StartCairn starts a `cairn run` process — the program name with args,
// such as a cairn binary with "run", "-config" and a path — with env as
// its whole environment (nil: this process's), and waits up to timeout
// for its "cairn started" line. It fails the test if cairn exits first or
// does not start in time. When the test ends cairn is killed, if it is
// still running.
func StartCairn(t testing.TB, env []string, timeout time.Duration, name string, args ...string) *Cairn {
	t.Helper()
	begin := time.Now()
	c := &Cairn{Process: StartProcess(t, env, name, args...)}
	line, err := c.Out.WaitLine(StartedMsg, c.Exited(), timeout)
	if err != nil {
		t.Fatalf("cairn: %v (%v)\noutput:\n%s", err, c.Err(), c.Out)
	}
	c.StartTime = time.Since(begin)
	if c.Started, err = ParseStarted(line); err != nil {
		t.Fatalf("cairn: %v", err)
	}
	return c
}
