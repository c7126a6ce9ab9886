package powercut

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
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
	bins, err := buildBinaries()
	binaries = bins
	buildErr = err
	goleak.VerifyTestMain(m,
		// Badger's caches, from the store opened in this process to check it.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*Cache[...]).processItems"),
		goleak.Cleanup(func(code int) {
			if bins.dir != "" {
				if err := os.RemoveAll(bins.dir); err != nil {
					fmt.Fprintln(os.Stderr, "remove test binaries:", err)
				}
			}
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

// testBinaries are the programs the tests run, built once by TestMain.
type testBinaries struct {
	dir, cairn, cutfs string
}

// Set once by TestMain before any test runs; read-only afterwards.
var (
	binaries testBinaries
	buildErr error
)

// buildBinaries builds cairn and cutfs into a temporary directory. They are
// built without the race detector even when the tests run with -race: the
// race detector slows cairn's ingest and cutfs's every write several times,
// which would stretch the cycles beyond a CI run's share. Their own packages'
// tests run them under -race; here they are the system under test, and this
// process (publisher, checks) still runs with the detector.
func buildBinaries() (testBinaries, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return testBinaries{}, fmt.Errorf("the go command is needed to build cairn and cutfs: %w", err)
	}
	dir, err := os.MkdirTemp("", "cairn-powercut-bin-")
	if err != nil {
		return testBinaries{}, err
	}
	b := testBinaries{dir: dir, cairn: filepath.Join(dir, "cairn"), cutfs: filepath.Join(dir, "cutfs")}
	for out, pkg := range map[string]string{
		b.cairn: "github.com/cairn-gateway/cairn/cmd/cairn",
		b.cutfs: "github.com/cairn-gateway/cairn/scripts/cutfs",
	} {
		cmd := exec.Command(gobin, "build", "-o", out, pkg)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// raceEnabled reports whether this test binary runs with the race detector.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// requirePowerCut fails the test unless it can mount cutfs: the binaries
// built, and this is root with /dev/fuse and fusermount3. It never skips:
// this test is the only proof of promise 1.
func requirePowerCut(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("power-cut tests must run as root to mount the cutfs FUSE file system (euid is %d)", os.Geteuid())
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("power-cut tests need /dev/fuse to mount the cutfs FUSE file system: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Fatalf("power-cut tests need fusermount3 to mount and unmount cutfs (apt-get install fuse3): %v", err)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// proc is a child process whose output (stdout and stderr) is kept.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *testkit.Lines
	exited chan struct{} // closed when the process has exited
	err    error         // what Wait returned; read after exited
}

// startProc starts a program with env as its whole environment; it is
// killed when the test ends if it is still running.
func startProc(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: filepath.Base(name), out: testkit.NewLines(), exited: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = env
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.exited)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.running() {
			if err := p.cmd.Process.Kill(); err != nil {
				t.Errorf("kill %s: %v", p.name, err)
			}
			<-p.exited
		}
	})
	return p
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends sig and waits until the process has exited, killing it after
// timeout. It returns what Wait returned, or an error if it had to kill.
func (p *proc) stop(sig os.Signal, timeout time.Duration) error {
	if err := p.cmd.Process.Signal(sig); err != nil && p.running() {
		return fmt.Errorf("signal %s to %s: %w", sig, p.name, err)
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		if err := p.cmd.Process.Kill(); err != nil {
			return fmt.Errorf("%s still running %s after %s, and kill: %w", p.name, timeout, sig, err)
		}
		<-p.exited
		return fmt.Errorf("%s still running %s after %s; killed", p.name, timeout, sig)
	}
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
type cutfsMount struct {
	*proc
	backing, mnt string
}

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
	c := &cutfsMount{backing: backing, mnt: mnt}
	c.proc = startProc(t, os.Environ(), binaries.cutfs, "-backing", backing, "-mount", mnt)
	t.Cleanup(func() {
		if c.running() {
			if err := c.stop(syscall.SIGTERM, stopTimeout); err != nil {
				t.Errorf("cutfs: %v\noutput:\n%s", err, c.out)
			}
		}
		if isMounted(mnt) {
			if out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput(); err != nil {
				t.Errorf("fusermount3 -u -z %s: %v\n%s", mnt, err, out)
			}
		}
	})
	if _, err := c.out.WaitLines("cutfs: mounted", 1, c.exited, startTimeout); err != nil {
		t.Fatalf("cutfs: %v (%v)\noutput:\n%s", err, c.err, c.out)
	}
	if !isMounted(mnt) {
		t.Fatalf("cutfs said mounted, but %s is not a mount point", mnt)
	}
	return c
}

var cutLineRE = regexp.MustCompile(`^cutfs: cut dropped_bytes=(\d+) dropped_files=(\d+) unsynced_names=(\d+)$`)

// cut cuts the power and returns cutfs's report.
func (c *cutfsMount) cut(t *testing.T) cutReport {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatalf("cut: signal cutfs: %v", err)
	}
	lines, err := c.out.WaitLines("cutfs: cut ", 1, c.exited, stopTimeout)
	if err != nil {
		t.Fatalf("cut: %v\noutput:\n%s", err, c.out)
	}
	m := cutLineRE.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("cut: unexpected report %q", lines[0])
	}
	var r cutReport
	r.droppedBytes, r.droppedFiles = atoi(t, m[1]), atoi(t, m[2])
	n := atoi(t, m[3])
	names, err := c.out.WaitLines("cutfs: unsynced-name ", n, c.exited, stopTimeout)
	if err != nil {
		t.Fatalf("cut: %v\noutput:\n%s", err, c.out)
	}
	for _, l := range names {
		r.names = append(r.names, strings.TrimPrefix(l, "cutfs: unsynced-name "))
	}
	return r
}

// unmount stops cutfs and checks that it exits 0 and the mount is gone.
func (c *cutfsMount) unmount(t *testing.T) {
	t.Helper()
	if err := c.stop(syscall.SIGTERM, stopTimeout); err != nil {
		t.Fatalf("unmount: cutfs: %v\noutput:\n%s", err, c.out)
	}
	if isMounted(c.mnt) {
		t.Fatalf("%s still mounted after cutfs exited", c.mnt)
	}
}

// isMounted reports whether dir is a mount point of this process's mount
// namespace.
func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// cairnConfig runs the embedded broker; ports are picked at each start.
const cairnConfig = `data_dir: %s
mqtt:
  embedded:
    listen: "127.0.0.1:0"
http:
  listen: "127.0.0.1:0"
`

// writeConfig writes a config file for dataDir, with extra YAML lines
// appended, into a new temporary directory and returns its path.
func writeConfig(t *testing.T, dataDir, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cairn.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(cairnConfig, strconv.Quote(dataDir))+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSyncEnv turns off the group commit's fsync in cairn (control run only).
const noSyncEnv = "CAIRN_UNSAFE_NO_SYNC"

// cairnProc is a running `cairn run`.
type cairnProc struct {
	*proc
	mqtt, http string // listen addresses, from the "cairn started" line
	readings   uint64 // readings in the store at start, from the same line
	started    time.Duration
}

// Lines cairn's store logs when Badger refused to open and when it opened
// after such refusals.
const (
	openRetryMsg    = "store did not open, trying again"
	openRepairedMsg = "store opened after repairing"
)

var (
	startedAddrRE     = regexp.MustCompile(`\b(mqtt|http)=(\S+)`)
	startedReadingsRE = regexp.MustCompile(`\breadings=(\d+)`)
)

// startCairn runs `cairn run -config cfg` and waits until it has logged
// that it started. With noSync the group commit is not synced.
func startCairn(t *testing.T, cfg string, noSync bool) *cairnProc {
	t.Helper()
	env := childEnv([]string{noSyncEnv})
	if noSync {
		env = append(env, noSyncEnv+"=1")
	}
	begin := time.Now()
	p := &cairnProc{proc: startProc(t, env, binaries.cairn, "run", "-config", cfg)}
	lines, err := p.out.WaitLines(`msg="cairn started"`, 1, p.exited, startTimeout)
	if err != nil {
		t.Fatalf("cairn: %v (%v)\noutput:\n%s", err, p.err, p.out)
	}
	p.started = time.Since(begin)
	for _, m := range startedAddrRE.FindAllStringSubmatch(lines[0], -1) {
		switch m[1] {
		case "mqtt":
			p.mqtt = strings.TrimPrefix(m[2], "tcp://")
		case "http":
			p.http = m[2]
		}
	}
	m := startedReadingsRE.FindStringSubmatch(lines[0])
	if p.mqtt == "" || p.http == "" || m == nil {
		t.Fatalf("cairn: no mqtt=, http= and readings= in %q", lines[0])
	}
	p.readings = uint64(atoi(t, m[1]))
	return p
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
func (p *cairnProc) openRetries() int { return len(p.out.Matching(openRetryMsg)) }

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
	resp, err := c.Get("http://" + p.http + "/v1/status")
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
		if time.Now().After(deadline) || !p.running() {
			t.Fatalf("cairn: %v\noutput:\n%s", err, p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs cairn and waits until it is gone.
func (p *cairnProc) kill(t *testing.T) {
	t.Helper()
	if err := p.stop(syscall.SIGKILL, stopTimeout); err == nil {
		t.Fatalf("cairn exited cleanly on SIGKILL\noutput:\n%s", p.out)
	} else if !p.killedBySignal() {
		t.Fatalf("cairn: %v (not the SIGKILL)\noutput:\n%s", err, p.out)
	}
}

// killedBySignal reports whether the process died of SIGKILL.
func (p *proc) killedBySignal() bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// shutdown stops cairn with SIGTERM and checks that it exits 0.
func (p *cairnProc) shutdown(t *testing.T) {
	t.Helper()
	if err := p.stop(syscall.SIGTERM, stopTimeout); err != nil {
		t.Fatalf("cairn after SIGTERM: %v, want exit status 0\noutput:\n%s", err, p.out)
	}
}
