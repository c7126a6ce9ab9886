package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	"go.uber.org/goleak"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
	"github.com/cairn-gateway/cairn/uplink"
)

func TestMain(m *testing.M) {
	// memory_limit_mib auto would give this process, and every daemon it
	// runs, the limit of one gateway. memory_test.go tests the limit.
	os.Setenv("GOMEMLIMIT", "off") //nolint:errcheck // cannot fail
	code := m.Run()
	if code == 0 {
		if err := leftGoroutines(10 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	cairnBinary.Remove()
	futureBinary.Remove()
	clockBinary.Remove()
	cutfsBinary.Remove()
	os.Exit(code)
}

// leftGoroutines returns goleak's report of the goroutines left running
// but the test framework's, if some are still there after wait. paho's
// Disconnect returns after its quiesce time and leaves a goroutine that
// ends within that time again; goleak's own retries (about half a
// second) did not always cover it on a loaded machine under -race. A
// goroutine that never ends is still reported.
func leftGoroutines(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Waiting limits. They are generous: a slow CI machine under -race must
// not fail a test that is merely slow. Nothing waits for them to pass.
const (
	startTimeout = 30 * time.Second // a daemon or broker to come up
	stopTimeout  = 30 * time.Second // a daemon or broker to exit
	ackTimeout   = 30 * time.Second // one PUBACK
)

// waitUntil polls cond until it reports done, and fails the test if that
// takes longer than timeout. cond's state is printed on failure.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logLines keeps what a process or an in-process daemon writes, as lines
// to wait on.
type logLines = testkit.Lines

func newLogLines() *logLines { return testkit.NewLines() }

// writeConfig writes a config file into a new temporary directory and
// returns its path. %DATA% in yaml is replaced by dataDir.
//
// Unless yaml sets store.commit_wait, it is set to 0s: a test whose
// clients publish to devices of their own, or one after another, would
// have one client's messages wait up to 750 ms for the others' (the wait
// that spares an SD card). The default is measured by scripts/bench.sh
// sdwear and window1, and tested by TestRun_CommitPolicy* and in package
// buffer.
func writeConfig(t *testing.T, dataDir, yaml string) string {
	t.Helper()
	return testkit.WriteConfig(t, dataDir, testDefaults(yaml))
}

// localConfig starts a configuration: the embedded broker and the HTTP
// API on ports picked at each start, the data in %DATA% (writeConfig).
const localConfig = testkit.LocalConfig

// telemetryConfig is cairn with the embedded broker reading JSON
// documents on sensors/{device}/telemetry, with units (a YAML flow map
// such as {temperature: "°C"}), and the API with the http keys in
// httpKeys (lines indented by two spaces, ending in a newline; "" for
// none).
func telemetryConfig(units, httpKeys string) string {
	return `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - pattern: "sensors/{device}/telemetry"
      format: auto
      units: ` + units + `
http:
  listen: "127.0.0.1:0"
` + httpKeys
}

// testDefaults sets, unless yaml sets them, store.commit_wait to 0s (a
// test waits for each PUBACK) and clock.trust to always: the machine
// running the tests may not say its clock is synchronised, and the tests
// of the clock itself (clock_test.go) set clock.trust.
func testDefaults(yaml string) string {
	if !strings.Contains(yaml, "\nclock:") {
		yaml = strings.TrimRight(yaml, "\n") + "\nclock:\n  trust: always\n"
	}
	if strings.Contains(yaml, "commit_wait:") {
		return yaml
	}
	lines := strings.Split(yaml, "\n")
	for i, l := range lines {
		if l == "store:" {
			return strings.Join(slices.Insert(lines, i+1, "  commit_wait: 0s"), "\n")
		}
	}
	return strings.TrimRight(yaml, "\n") + "\nstore:\n  commit_wait: 0s\n"
}

// inProcess is `cairn run` running in this process, as run() in a goroutine.
type inProcess struct {
	mqtt, http string // listen addresses, from the "cairn started" line
	log        *logLines
	cancel     context.CancelFunc
	done       chan struct{} // closed when run has returned
	err        error         // what run returned; read after done
}

// startDaemon runs `cairn run -config path` until the test ends (or stop)
// and waits until it has logged that it started.
func startDaemon(t *testing.T, path string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &inProcess{log: newLogLines(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.err = run(ctx, []string{"run", "-config", path}, io.Discard, d.log)
	}()
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Errorf("cairn run: %v\nlog:\n%s", err, d.log)
		}
	})
	line, err := d.log.WaitLine(testkit.StartedMsg, d.done, startTimeout)
	if err != nil {
		d.cancel()
		<-d.done
		t.Fatalf("cairn run: %v (run returned %v)\nlog:\n%s", err, d.err, d.log)
	}
	started, err := testkit.ParseStarted(line)
	if err != nil {
		t.Fatal(err)
	}
	d.mqtt, d.http = started.MQTT, started.HTTP
	return d
}

// stop cancels run's context and returns what run returned. It may be
// called more than once.
func (d *inProcess) stop() error {
	d.cancel()
	select {
	case <-d.done:
		return d.err
	case <-time.After(stopTimeout):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		return fmt.Errorf("still running %s after its context was cancelled; goroutines:\n%s", stopTimeout, buf)
	}
}

// process is a program the test runs; out is its Out, by the name this
// package's tests use.
type process struct {
	*testkit.Process
	out *logLines
}

// startProcess starts a program; it is killed when the test ends if it is
// still running.
func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, nil, name, args...)
}

// startProcessEnv is startProcess with env added to the test's environment.
func startProcessEnv(t *testing.T, env []string, name string, args ...string) *process {
	t.Helper()
	p := testkit.StartProcess(t, environ(env), name, args...)
	return &process{Process: p, out: p.Out}
}

// environ returns this process's environment with env added, or nil (the
// same, to exec) if env is nil.
func environ(env []string) []string {
	if env == nil {
		return nil
	}
	return append(os.Environ(), env...)
}

// signal sends sig to the process and waits until it has exited. It
// returns what Wait returned, and fails the test if the process is still
// running after stopTimeout.
func (p *process) signal(t *testing.T, sig os.Signal) error {
	t.Helper()
	err := p.Stop(sig, stopTimeout)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%v; output:\n%s", err, p.out)
	}
	return err
}

// cairnProcess is the cairn binary running `cairn run`.
type cairnProcess struct {
	*process
	mqtt, http string // listen addresses, from the "cairn started" line
	readings   uint64 // readings in the store at start, from the same line
}

// startCairn runs `cairn run -config cfg` as a process and waits until it
// has started.
func startCairn(t *testing.T, bin, cfg string) *cairnProcess {
	t.Helper()
	return startCairnEnv(t, bin, cfg, nil)
}

// startCairnEnv is startCairn with env added to the test's environment.
func startCairnEnv(t *testing.T, bin, cfg string, env []string) *cairnProcess {
	t.Helper()
	return newCairnProcess(testkit.StartCairn(t, environ(env), startTimeout, bin, "run", "-config", cfg))
}

func newCairnProcess(c *testkit.Cairn) *cairnProcess {
	return &cairnProcess{process: &process{Process: c.Process, out: c.Out}, mqtt: c.MQTT, http: c.HTTP, readings: c.Readings}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a program that must keep its port across a restart.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// connectPublisher connects a sensor-like MQTT client (clean session, no
// automatic reconnection) to the broker at addr (host:port).
func connectPublisher(addr, clientID string) (paho.Client, error) {
	return testkit.ConnectPublisher(addr, clientID, startTimeout)
}

// mustConnect is connectPublisher that fails the test on error; the client
// is disconnected when the test ends.
func mustConnect(t *testing.T, addr, clientID string) paho.Client {
	t.Helper()
	c, err := connectPublisher(addr, clientID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

// errStopped is what a publisher returns when it was told to stop
// (testkit.Window).
var errStopped = testkit.ErrStopped

// publish1 publishes at QoS 1 and waits for the PUBACK.
func publish1(c paho.Client, topic, payload string) error {
	tok := c.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(ackTimeout) {
		return fmt.Errorf("publish %s: no PUBACK in %s", topic, ackTimeout)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// waitToken waits for a publish's PUBACK.
func waitToken(t *testing.T, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(ackTimeout) {
		t.Fatal("no PUBACK in time")
	}
	if err := tok.Error(); err != nil {
		t.Fatal(err)
	}
}

// apiClient calls a daemon's HTTP API.
type apiClient struct {
	base string
	c    *http.Client
}

func newAPIClient(addr string) *apiClient {
	return &apiClient{
		base: "http://" + addr,
		// No keep-alive: no idle connection outlives a test.
		c: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// get fetches path, decodes its JSON body into v (if not nil) and returns
// the status code.
func (a *apiClient) get(t *testing.T, path string, v any) int {
	t.Helper()
	code, body, err := a.fetch(path)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %d, body is not the JSON expected: %v\n%s", path, code, err, body)
		}
	}
	return code
}

func (a *apiClient) fetch(path string) (int, []byte, error) {
	resp, err := a.c.Get(a.base + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return resp.StatusCode, body, nil
}

// statusDoc is the part of /v1/status the tests read.
type statusDoc struct {
	MQTT struct {
		Mode      string `json:"mode"`
		Connected bool   `json:"connected"`
	} `json:"mqtt"`
	Ingest struct {
		Messages   uint64            `json:"messages"`
		Readings   uint64            `json:"readings"`
		Stored     uint64            `json:"stored"`
		Duplicates uint64            `json:"duplicates"`
		Failed     uint64            `json:"failed"`
		Rejected   uint64            `json:"rejected"`
		ByReason   map[string]uint64 `json:"rejected_by_reason"`
	} `json:"ingest"`
	Store struct {
		Readings uint64 `json:"readings"`
		Series   int    `json:"series"`
	} `json:"store"`
	Uplink  *uplink.Status  `json:"uplink"`
	Uplinks []uplink.Status `json:"uplinks"`
}

func (a *apiClient) status(t *testing.T) statusDoc {
	t.Helper()
	return statusAs[statusDoc](t, a)
}

// statusAs returns the parts of /v1/status that the struct T reads, and
// fails the test unless the status is 200.
func statusAs[T any](t *testing.T, a *apiClient) T {
	t.Helper()
	var st T
	if code := a.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: got %d, want 200", code)
	}
	return st
}

// readingDoc is one reading as the readings endpoint serves it.
type readingDoc struct {
	Metric string  `json:"metric"`
	TS     string  `json:"ts"`
	Value  float64 `json:"value"`
}

type readingsDoc struct {
	Device   string       `json:"device"`
	Readings []readingDoc `json:"readings"`
}

// msTS formats epoch milliseconds as the API does.
func msTS(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// storedReadings opens the data directory of a stopped daemon and returns
// every reading of every series, series after series, and the count the
// store keeps.
func storedReadings(t *testing.T, dir string) (all []buffer.Reading, counted uint64) {
	t.Helper()
	store, err := buffer.Open(buffer.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, s := range store.SeriesList() {
		rs, err := store.Readings(buffer.Query{Device: s.Device, Metric: s.Metric, From: math.MinInt64, To: math.MaxInt64, Limit: buffer.MaxQueryLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == buffer.MaxQueryLimit {
			t.Fatalf("series %s/%s has %d readings or more: too many for one query", s.Device, s.Metric, len(rs))
		}
		all = append(all, rs...)
	}
	return all, store.ReadingCount()
}

// binaryBuild is a command built once for the tests that run it as a
// process; TestMain removes it.
type binaryBuild struct{ testkit.Binary }

// get builds the binary on first use and returns its path.
func (b *binaryBuild) get(t *testing.T) string {
	t.Helper()
	return b.Path(t)
}

// cairnBinary is the cairn command.
var cairnBinary = binaryBuild{testkit.Binary{Pkg: "."}}

// futureBinary is the cairn command stamped with a build date far ahead
// of any clock: its retention by age is always paused.
var futureBinary = binaryBuild{testkit.Binary{Pkg: ".", Flags: []string{"-ldflags", "-X main.date=2099-01-01T00:00:00Z"}}}

// clockBinary is the cairn command built with the testclock tag, whose
// clock a test moves (testclock.go), stamped with a build date of
// 2026-06-01.
var clockBinary = binaryBuild{testkit.Binary{Pkg: ".", Flags: []string{"-tags", "testclock", "-ldflags", "-X main.date=2026-06-01T00:00:00Z"}}}

// checkAggregates opens the data directory of a stopped daemon and checks
// that the pre-aggregates of every series equal a recomputation from its
// stored readings: over all time, and minute by minute.
func checkAggregates(t *testing.T, dir string) {
	t.Helper()
	store, err := buffer.Open(buffer.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, se := range store.SeriesList() {
		rs, err := store.Readings(buffer.Query{Device: se.Device, Metric: se.Metric, From: math.MinInt64, To: math.MaxInt64, Limit: buffer.MaxQueryLimit})
		if err != nil {
			t.Fatal(err)
		}
		if store.IsText(se.Device, se.Metric) { // time in state: its own tests (buffer/states_test.go)
			got, _, err := store.StatesCover(se.Device, se.Metric, math.MinInt64, math.MaxInt64, time.Now().UnixNano())
			if err != nil || got.Count != uint64(len(rs)) {
				t.Errorf("%s/%s: %d readings, %d in the aggregates of all (%v)", se.Device, se.Metric, len(rs), got.Count, err)
			}
			continue
		}
		var want aggregate.Stats
		minutes := map[int64]*aggregate.Stats{}
		for _, r := range rs {
			want.Add(r.Value)
			m := aggregate.Minute.Truncate(r.TS)
			if minutes[m] == nil {
				minutes[m] = new(aggregate.Stats)
			}
			minutes[m].Add(r.Value)
		}
		got, _, err := store.StatsCover(se.Device, se.Metric, math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if !closeStats(got, want) {
			t.Errorf("%s/%s: aggregate of all readings %+v, recomputed %+v", se.Device, se.Metric, got, want)
		}
		groups, _, err := store.StatsByLevel(se.Device, se.Metric, aggregate.Minute, rs[0].TS, rs[len(rs)-1].TS+1)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != len(minutes) {
			t.Errorf("%s/%s: %d minute records, readings fall in %d minutes", se.Device, se.Metric, len(groups), len(minutes))
		}
		for _, g := range groups {
			if w := minutes[g.Start]; w == nil || !closeStats(g.Stats, *w) {
				t.Errorf("%s/%s: minute %d: got %+v, recomputed %+v", se.Device, se.Metric, g.Start, g.Stats, w)
			}
		}
	}
}

// closeStats compares aggregates: count, min and max exactly, sums to the
// rounding of adding the same values in another order (2·n·ε·n·max|v|).
func closeStats(a, b aggregate.Stats) bool {
	if a.Count != b.Count || a.Min != b.Min || a.Max != b.Max {
		return false
	}
	n := float64(a.Count)
	m := math.Max(math.Abs(b.Min), math.Abs(b.Max))
	near := func(x, y, bound float64) bool { return x == y || math.Abs(x-y) <= 2*n*0x1p-52*bound }
	return near(a.Sum, b.Sum, n*m) && near(a.SumSqr, b.SumSqr, n*m*m)
}
