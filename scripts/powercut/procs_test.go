package powercut

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Badger's caches, from the store opened in this process to check it.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*Cache[...]).processItems"),
		goleak.Cleanup(func(code int) {
			cairnBinary.Remove()
			cutfsBinary.Remove()
			os.Exit(code)
		}))
}

// Waiting limits. They are generous: a slow CI machine under -race must not
// fail a test that is merely slow. Nothing waits for them to pass.
const (
	startTimeout = 60 * time.Second // cairn or cutfs to come up
	stopTimeout  = 30 * time.Second // cairn or cutfs to exit
	ackTimeout   = 30 * time.Second // one PUBACK
)

// The programs the tests run, each built once. They are built without the
// race detector even when the tests run with -race: the race detector
// slows cairn's ingest and cutfs's every write several times, which would
// stretch the cycles beyond a CI run's share. Their own packages' tests
// run them under -race; here they are the system under test, and this
// process (publisher, checks) still runs with the detector.
var (
	cairnBinary = testkit.Binary{Pkg: "github.com/cairn-gateway/cairn/cmd/cairn"}
	cutfsBinary = testkit.Binary{Pkg: "github.com/cairn-gateway/cairn/scripts/cutfs"}
)

// requirePowerCut fails the test unless it can mount cutfs: this is root
// with /dev/fuse and fusermount3, and the binaries built. It never skips:
// this test is the only proof of promise 1.
func requirePowerCut(t *testing.T) {
	t.Helper()
	testkit.RequireFUSE(t)
	cairnBinary.Path(t)
	cutfsBinary.Path(t)
}

// childEnv is this process's environment without the variables named,
// plus extra.
func childEnv(drop []string, extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(drop, name)
	})
	return append(env, extra...)
}

// cutfsMount is a running cutfs process and its mount.
type cutfsMount struct{ *testkit.Cutfs }

// cutReport is what cutfs printed for a cut.
type cutReport struct {
	droppedBytes, droppedFiles int
	names                      []string // "op=… path=…", one per unsynced name change
}

// mountCutfs mounts backing at mnt with a new cutfs process and waits until
// the mount is live. When the test ends the mount is taken down, lazily if
// it is stuck.
func mountCutfs(t *testing.T, backing, mnt string) *cutfsMount {
	t.Helper()
	return &cutfsMount{testkit.MountCutfs(t, cutfsBinary.Path(t), backing, mnt, startTimeout)}
}

var cutLineRE = regexp.MustCompile(`^cutfs: cut dropped_bytes=(\d+) dropped_files=(\d+) unsynced_names=(\d+)$`)

// cut cuts the power and returns cutfs's report.
func (c *cutfsMount) cut(t *testing.T) cutReport {
	t.Helper()
	if err := c.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatalf("cut: signal cutfs: %v", err)
	}
	lines, err := c.Out.WaitLines("cutfs: cut ", 1, c.Exited(), stopTimeout)
	if err != nil {
		t.Fatalf("cut: %v\noutput:\n%s", err, c.Out)
	}
	m := cutLineRE.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("cut: unexpected report %q", lines[0])
	}
	var r cutReport
	r.droppedBytes, r.droppedFiles = atoi(t, m[1]), atoi(t, m[2])
	n := atoi(t, m[3])
	names, err := c.Out.WaitLines("cutfs: unsynced-name ", n, c.Exited(), stopTimeout)
	if err != nil {
		t.Fatalf("cut: %v\noutput:\n%s", err, c.Out)
	}
	for _, l := range names {
		r.names = append(r.names, strings.TrimPrefix(l, "cutfs: unsynced-name "))
	}
	return r
}

// writeConfig writes a config file for dataDir, with extra YAML lines
// appended, into a new temporary directory and returns its path.
func writeConfig(t *testing.T, dataDir, extra string) string {
	t.Helper()
	return testkit.WriteConfig(t, dataDir, testkit.LocalConfig+extra)
}

// noSyncEnv turns off the group commit's fsync in cairn (control run only).
const noSyncEnv = "CAIRN_UNSAFE_NO_SYNC"

// cairnProc is a running `cairn run`.
type cairnProc struct{ *testkit.Cairn }

// Lines cairn's store logs when Badger refused to open and when it opened
// after such refusals.
const (
	openRetryMsg    = "store did not open, trying again"
	openRepairedMsg = "store opened after repairing"
)

// startCairn runs `cairn run -config cfg` and waits until it has logged
// that it started. With noSync the group commit is not synced.
func startCairn(t *testing.T, cfg string, noSync bool) *cairnProc {
	t.Helper()
	env := childEnv([]string{noSyncEnv})
	if noSync {
		env = append(env, noSyncEnv+"=1")
	}
	return &cairnProc{testkit.StartCairn(t, env, startTimeout, cairnBinary.Path(t), "run", "-config", cfg)}
}

// atoi parses a number that a regular expression matched as digits.
func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// openRetries returns how many times the store's open was retried.
func (p *cairnProc) openRetries() int { return len(p.Out.Matching(openRetryMsg)) }

// statusDoc is the part of /v1/status the tests read.
type statusDoc struct {
	Store struct {
		Readings     uint64  `json:"readings"`
		Commits      uint64  `json:"commits"`
		CommitMillis float64 `json:"commit_ms_avg"`
	} `json:"store"`
}

// getStatus fetches /v1/status once.
func (p *cairnProc) getStatus() (statusDoc, error) {
	var st statusDoc
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + p.HTTP + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /v1/status: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET /v1/status: %w", err)
	}
	return st, nil
}

// status polls /v1/status until it answers 200 and returns what it said.
func (p *cairnProc) status(t *testing.T) statusDoc {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		st, err := p.getStatus()
		if err == nil {
			return st
		}
		if time.Now().After(deadline) || !p.Running() {
			t.Fatalf("cairn: %v\noutput:\n%s", err, p.Out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs cairn and waits until it is gone.
func (p *cairnProc) kill(t *testing.T) {
	t.Helper()
	if err := p.Stop(syscall.SIGKILL, stopTimeout); err == nil {
		t.Fatalf("cairn exited cleanly on SIGKILL\noutput:\n%s", p.Out)
	} else if !p.killedBySignal() {
		t.Fatalf("cairn: %v (not the SIGKILL)\noutput:\n%s", err, p.Out)
	}
}

// killedBySignal reports whether the process died of SIGKILL.
func (p *cairnProc) killedBySignal() bool {
	ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// shutdown stops cairn with SIGTERM and checks that it exits 0.
func (p *cairnProc) shutdown(t *testing.T) {
	t.Helper()
	if err := p.Stop(syscall.SIGTERM, stopTimeout); err != nil {
		t.Fatalf("cairn after SIGTERM: %v, want exit status 0\noutput:\n%s", err, p.Out)
	}
}
