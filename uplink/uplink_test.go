package uplink

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/goleak"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*Cache[...]).processItems"),
	)
}

// store is a real store with its writer and the cursor of an upstream in
// its log, closed at the end of the test. It is the uplink's Outbox.
type store struct {
	*buffer.Store
	cur  *buffer.Cursor
	w    *buffer.Writer
	stop func() error // stops the writer and closes the store
}

func (s *store) Outbox() buffer.OutboxState    { return s.cur.Outbox() }
func (s *store) OutboxWake() <-chan struct{}   { return s.cur.OutboxWake() }
func (s *store) AdvanceOutbox(to uint64) error { return s.cur.AdvanceOutbox(to) }
func (s *store) SetOutboxBatch(end uint64, note int64) error {
	return s.cur.SetOutboxBatch(end, note)
}

// cursor returns the cursor of the test's upstream in the log of s.
func cursor(t *testing.T, s *buffer.Store) *buffer.Cursor {
	t.Helper()
	c, err := s.Cursor("up")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openStore starts a store in dir that closes when the test ends.
func openStore(t *testing.T, dir string) *store {
	t.Helper()
	s := startStore(t, dir)
	t.Cleanup(func() { s.close(t) })
	return s
}

// startStore starts a store in dir; close it with close.
func startStore(t *testing.T, dir string) *store {
	t.Helper()
	s, err := buffer.Open(buffer.Options{Dir: dir, MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := cursor(t, s)
	w := buffer.NewWriter(s, buffer.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	return &store{Store: s, cur: c, w: w, stop: func() error {
		cancel()
		return errors.Join(<-done, s.Close())
	}}
}

func (s *store) close(t *testing.T) {
	if err := s.stop(); err != nil {
		t.Errorf("close store: %v", err)
	}
}

// add stores n readings of two metrics per device and timestamp, as
// messages of a sensor would, starting at reading number first.
func (s *store) add(t *testing.T, first, n int) {
	t.Helper()
	var rs []buffer.Reading
	for i := first; i < first+n; i++ {
		rs = append(rs, reading(i))
	}
	ch := make(chan buffer.Result, 1)
	if err := s.w.Submit(context.Background(), rs, func(r buffer.Result) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	if res := <-ch; res.Err != nil || res.Stored != n {
		t.Fatalf("store %d readings: %+v", n, res)
	}
}

// testEpoch is the time of the first test reading: 2026-09-21T…Z.
const testEpoch = 1_790_000_000 * int64(time.Second)

// reading is the i-th reading of the test data: device d<i/2%7>, metrics
// t and h by turns, one timestamp per pair.
func reading(i int) buffer.Reading {
	metric := "t"
	if i%2 == 1 {
		metric = "h"
	}
	return buffer.Reading{
		Device: fmt.Sprintf("d%d", i/2%7),
		Metric: metric,
		TS:     testEpoch + int64(i/2)*1e6,
		Value:  float64(i) / 4,
	}
}

// runUplink runs u until the test ends.
func runUplink(t *testing.T, u *Uplink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- u.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("uplink: %v", err)
		}
	})
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// upstream is an HTTP server that records every batch it accepts and
// answers according to a script of misbehaviours, one per request.
type upstream struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []string // what to do with the next requests: "ok", "500", "429", "429-0", "503", "slow", "reset", "400", "404", "301"
	// accepted batches, by Idempotency-Key, with their lines, in order.
	keys     []string
	lines    map[string][]string
	attempts []time.Time
	headers  []http.Header
}

func newUpstream(t *testing.T, script ...string) *upstream {
	u := &upstream{t: t, script: script, lines: make(map[string][]string)}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	act := "ok"
	if len(u.script) > 0 {
		act, u.script = u.script[0], u.script[1:]
	}
	u.attempts = append(u.attempts, time.Now())
	u.headers = append(u.headers, r.Header.Clone())
	u.mu.Unlock()
	switch act {
	case "500":
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	case "429", "503":
		w.Header().Set("Retry-After", "1")
		code, _ := strconv.Atoi(act)
		http.Error(w, "slow down", code)
		return
	case "slow":
		time.Sleep(1500 * time.Millisecond) // over the uplink's timeout
	case "reset":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			u.t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
		return
	case "400":
		http.Error(w, `{"error":"unable to parse 'x': bad timestamp"}`, http.StatusBadRequest)
		return
	case "404":
		http.Error(w, `{"error":"database not found: \"sensors\""}`, http.StatusNotFound)
		return
	case "301":
		http.Redirect(w, r, "/moved", http.StatusMovedPermanently)
		return
	case "429-0":
		w.Header().Set("Retry-After", "0")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		u.t.Errorf("%s %s: the uplink only POSTs", r.Method, r.URL)
		return
	}
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return // the client went away (its timeout)
	}
	if act == "slow" {
		return // answered too late: the client gave up
	}
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	if _, seen := u.lines[key]; !seen {
		u.keys = append(u.keys, key)
	}
	u.lines[key] = strings.Split(strings.TrimSpace(string(b)), "\n")
	u.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// received returns the accepted lines in the order of their batches.
func (u *upstream) received() (keys []string, lines []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, k := range u.keys {
		lines = append(lines, u.lines[k]...)
	}
	return append([]string(nil), u.keys...), lines
}

// wantLines is the line protocol of readings first to first+n-1 (pairs
// of metrics share a line), as the uplink must write it.
func wantLines(gateway string, first, n int) []string {
	var out []string
	for i := first; i < first+n; i += 2 {
		a, b := reading(i), reading(i+1)
		out = append(out, fmt.Sprintf("readings,device=%s,gateway=%s t=%s,h=%s %d", a.Device, gateway,
			strconv.FormatFloat(a.Value, 'g', -1, 64), strconv.FormatFloat(b.Value, 'g', -1, 64), a.TS))
	}
	return out
}

// sameLines reports the first difference between got and want.
func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("line %d upstream:\n got %s\nwant %s", i, got[i], want[i])
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d lines upstream, want %d", len(got), len(want))
	}
}

// sendAll stores n readings, runs an uplink (with testOptions, changed by
// change) against an upstream following script, and waits until
// everything left the outbox.
func sendAll(t *testing.T, n int, script []string, change func(*Options)) (*store, *upstream, *Uplink) {
	t.Helper()
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newUpstream(t, script...)
	s.add(t, 0, n)
	opts := testOptions(up.srv.URL, dir)
	if change != nil {
		change(&opts)
	}
	return s, up, startAndDrain(t, s, opts)
}

// startAndDrain runs an uplink of s with opts until the outbox is empty.
func startAndDrain(t *testing.T, s *store, opts Options) *Uplink {
	t.Helper()
	u, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	waitFor(t, "the outbox to drain", func() bool { return s.Outbox().Pending() == 0 })
	return u
}

func testOptions(url, dir string) Options {
	return Options{
		URL:           url,
		Gateway:       "gw1",
		BatchReadings: 100,
		Interval:      50 * time.Millisecond,
		Timeout:       time.Second,
		RetryWaitMin:  100 * time.Millisecond,
		RetryWaitMax:  400 * time.Millisecond,
		RetryAfterMax: 700 * time.Millisecond,
		Gzip:          true,
		ParkDir:       filepath.Join(dir, "parked"),
	}
}

// While an upstream fails, the batch waits as its body: the readings it
// was made from are let go at the first failure (an outage can last
// hours), and the batch that goes at last is the same.
func TestUplink_LetsGoOfReadingsWhileRetrying(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newUpstream(t, "500", "503", "ok")
	s.add(t, 0, 100)
	u, err := New(s, testOptions(up.srv.URL, dir))
	if err != nil {
		t.Fatal(err)
	}
	// Before each attempt, on the uplink's goroutine: the readings held.
	held := make(chan int, 16)
	logAttempt := u.client.RequestLogHook
	u.client.RequestLogHook = func(l retryablehttp.Logger, req *http.Request, n int) {
		logAttempt(l, req, n)
		held <- cap(u.readings)
	}
	runUplink(t, u)
	waitFor(t, "the outbox to drain", func() bool { return s.Outbox().Pending() == 0 })

	var caps []int
	for range 3 {
		caps = append(caps, <-held)
	}
	if caps[0] < 100 || caps[1] != 0 || caps[2] != 0 {
		t.Errorf("readings held before each attempt: %v, want 100 or more, then none", caps)
	}
	_, lines := up.received()
	sameLines(t, lines, wantLines("gw1", 0, 100))
}

func TestUplink_DeliversEveryBatchOnceInOrderThroughFailures(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newUpstream(t, "500", "ok", "429", "ok", "slow", "reset", "ok", "503", "500", "500")
	s.add(t, 0, 1000)
	u := startAndDrain(t, s, testOptions(up.srv.URL, dir))

	keys, lines := up.received()
	var wantKeys []string
	for i := 0; i < 1000; i += 100 {
		wantKeys = append(wantKeys, fmt.Sprintf("gw1-%d", i))
	}
	if fmt.Sprint(keys) != fmt.Sprint(wantKeys) {
		t.Errorf("batches accepted, by Idempotency-Key:\n got %v\nwant %v", keys, wantKeys)
	}
	want := wantLines("gw1", 0, 1000)
	sameLines(t, lines, want)
	st := u.Status()
	// Seven failures in the script: each is one retry.
	if st.SentBatches != 10 || st.SentReadings != 1000 || st.Retries != 7 || st.ParkedBatches != 0 || st.PendingReadings != 0 {
		t.Errorf("status: %+v", st)
	}
	if st.LastSuccess == nil || st.LastError == "" {
		t.Errorf("status: last success %v, last error %q", st.LastSuccess, st.LastError)
	}

	// Waits between attempts: backoff doubles from 100 ms with jitter of
	// up to half, capped at 400 ms; Retry-After asks 1 s, capped at 700 ms.
	up.mu.Lock()
	at := up.attempts
	up.mu.Unlock()
	gap := func(i int) time.Duration { return at[i].Sub(at[i-1]) }
	if d := gap(1); d < 50*time.Millisecond || d > 300*time.Millisecond {
		t.Errorf("wait after a 500: %v, want 50–100 ms of backoff", d)
	}
	if d := gap(3); d < 650*time.Millisecond || d > time.Second {
		t.Errorf("wait after a 429 with Retry-After: 1: %v, want the 700 ms cap", d)
	}
	if d := gap(8); d < 650*time.Millisecond || d > time.Second {
		t.Errorf("wait after a 503 with Retry-After: 1: %v, want the 700 ms cap", d)
	}
	if d := gap(9); d < 100*time.Millisecond || d > 300*time.Millisecond {
		t.Errorf("wait after a 500 that follows a failure: %v, want 100–200 ms", d)
	}
	if d := gap(10); d < 200*time.Millisecond || d > 500*time.Millisecond {
		t.Errorf("wait after the third failure in a row: %v, want 200–400 ms (the cap)", d)
	}
	for i, h := range up.headers {
		if h.Get("Content-Encoding") != "gzip" || h.Get("Idempotency-Key") == "" {
			t.Errorf("request %d: headers %v", i, h)
		}
	}
}

func TestUplink_ParksMalformedBatchAndGoesOn(t *testing.T) {
	s, up, u := sendAll(t, 300, []string{"ok", "400", "ok"}, nil)
	dir := filepath.Dir(u.parkDir)
	keys, lines := up.received()
	if fmt.Sprint(keys) != "[gw1-0 gw1-200]" {
		t.Errorf("accepted batches %v, want gw1-0 and gw1-200", keys)
	}
	want := append(wantLines("gw1", 0, 100), wantLines("gw1", 200, 100)...)
	sameLines(t, lines, want)
	st := u.Status()
	if st.ParkedBatches != 1 || st.ParkedReadings != 100 || st.SentBatches != 2 || !strings.Contains(st.LastError, "400") {
		t.Errorf("status: %+v", st)
	}
	body, err := os.ReadFile(filepath.Join(dir, "parked", "gw1-100.lp"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSpace(string(body)), "\n"); fmt.Sprint(got) != fmt.Sprint(wantLines("gw1", 100, 100)) {
		t.Errorf("parked body: %.200q", body)
	}
	resp, err := os.ReadFile(filepath.Join(dir, "parked", "gw1-100.response"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), "400 Bad Request") || !strings.Contains(string(resp), "bad timestamp") {
		t.Errorf("parked response: %q", resp)
	}
	// A new uplink on the same directory counts what is parked.
	u2, err := New(s, testOptions(up.srv.URL, dir))
	if err != nil {
		t.Fatal(err)
	}
	if n := u2.Status().ParkedBatches; n != 1 {
		t.Errorf("parked batches seen at start: %d, want 1", n)
	}
}

func TestUplink_ResendsTheSameBatchAfterRestart(t *testing.T) {
	// The uplink stops while a batch is refused; the readings stored
	// meanwhile must not change that batch: after the restart it goes
	// again whole, under the same id, and only then the rest.
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newUpstream(t, "500", "500", "500", "500", "500", "500", "500", "500")
	s.add(t, 0, 60)
	opts := testOptions(up.srv.URL, dir)
	u, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- u.Run(ctx) }()
	waitFor(t, "a retry", func() bool { return u.Status().Retries > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := s.Outbox(); o.BatchEnd != 60 || o.Cursor != 0 {
		t.Fatalf("outbox after stop: %+v, want the batch 0–60 recorded", o)
	}
	s.add(t, 60, 100)
	up.mu.Lock()
	up.script = nil
	up.mu.Unlock()
	// A smaller batch size after the restart does not change the batch
	// that was recorded.
	opts.BatchBytes = 1024
	u, err = New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	waitFor(t, "the outbox to drain", func() bool { return s.Outbox().Pending() == 0 })
	keys, lines := up.received()
	if len(keys) < 2 || keys[0] != "gw1-0" || keys[1] != "gw1-60" {
		t.Errorf("batches %v, want gw1-0 (60 readings) then gw1-60", keys)
	}
	up.mu.Lock()
	first := up.lines["gw1-0"]
	up.mu.Unlock()
	sameLines(t, first, wantLines("gw1", 0, 60))
	// The rest went in batches of about 1 KiB, which may part a message's
	// two fields: count readings, not lines.
	fields := 0
	for _, l := range lines {
		fields += strings.Count(strings.Fields(l)[1], "=")
	}
	if fields != 160 {
		t.Errorf("%d readings upstream, want 160", fields)
	}
}

func TestUplink_SkipsReadingsOlderThanMaxAge(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newUpstream(t)
	old := buffer.Reading{Device: "d", Metric: "m", TS: time.Now().Add(-48 * time.Hour).UnixNano(), Value: 1}
	fresh := buffer.Reading{Device: "d", Metric: "m", TS: time.Now().UnixNano(), Value: 2}
	ch := make(chan buffer.Result, 1)
	if err := s.w.Submit(context.Background(), []buffer.Reading{old, fresh}, func(r buffer.Result) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	<-ch
	opts := testOptions(up.srv.URL, dir)
	opts.MaxAge = 24 * time.Hour
	opts.Format = JSON
	opts.Gzip = false
	opts.Authorization = "Token s3cret"
	u, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	waitFor(t, "the outbox to drain", func() bool { return s.Outbox().Pending() == 0 })
	_, lines := up.received()
	if len(lines) != 1 {
		t.Fatalf("got %d JSON documents, want 1", len(lines))
	}
	var doc struct {
		Gateway, Batch string
		Readings       []struct {
			ID, Device, Metric, TS string
			Value                  float64
		}
	}
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Gateway != "gw1" || doc.Batch != "gw1-0" || len(doc.Readings) != 1 || doc.Readings[0].Value != 2 ||
		doc.Readings[0].TS != fresh.Time().Format(time.RFC3339Nano) ||
		doc.Readings[0].ID != fmt.Sprintf("%019d-d-%016x", fresh.TS, 1) {
		t.Errorf("JSON batch: %+v", doc)
	}
	if st := u.Status(); st.Skipped != 1 || st.SentReadings != 1 {
		t.Errorf("status: %+v", st)
	}
	up.mu.Lock()
	h := up.headers[0]
	up.mu.Unlock()
	if h.Get("Authorization") != "Token s3cret" || h.Get("Content-Type") != "application/json" || h.Get("Content-Encoding") != "" {
		t.Errorf("request headers: %v", h)
	}
}

func TestUplink_BasicAuth(t *testing.T) {
	_, up, _ := sendAll(t, 2, nil, func(o *Options) { o.Username, o.Password = "gw", "pa:ss" })
	up.mu.Lock()
	defer up.mu.Unlock()
	req := http.Request{Header: up.headers[0]}
	if user, pass, ok := req.BasicAuth(); !ok || user != "gw" || pass != "pa:ss" {
		t.Errorf("basic auth: got %q %q %v", user, pass, ok)
	}
}

func TestRetryAfter(t *testing.T) {
	resp := func(code int, v string) *http.Response {
		return &http.Response{StatusCode: code, Header: http.Header{"Retry-After": {v}}}
	}
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		resp *http.Response
		min  time.Duration
		max  time.Duration
		ok   bool
	}{
		{resp(429, "7"), 7 * time.Second, 7 * time.Second, true},
		{resp(503, date), 88 * time.Second, 90 * time.Second, true},
		{resp(503, "soon"), 0, 0, false},
		{resp(500, "7"), 0, 0, false}, // only 429 and 503 ask to wait
		{nil, 0, 0, false},
	} {
		d, ok := retryAfter(tc.resp)
		if ok != tc.ok || d < tc.min || d > tc.max {
			t.Errorf("retryAfter(%v) = %v, %v; want %v–%v, %v", tc.resp, d, ok, tc.min, tc.max, tc.ok)
		}
	}
}

func TestEncoder_InfluxEscapesAndSplitsRepeatedMetrics(t *testing.T) {
	e := newEncoder(Influx, "my readings", "gw 1")
	rs := []buffer.OutboxReading{
		{Reading: buffer.Reading{Device: "a,b", Metric: "t=1", TS: 5, Value: 1.5}},
		{Reading: buffer.Reading{Device: "a,b", Metric: "h", TS: 5, Value: -2}},
		{Reading: buffer.Reading{Device: "a,b", Metric: "t=1", TS: 5, Value: 3}}, // same metric again: a line of its own
		{Reading: buffer.Reading{Device: "c", Metric: "t", TS: 6, Value: 1e21}},
	}
	body, skipped := e.encode("x", rs)
	want := "my\\ readings,device=a\\,b,gateway=gw\\ 1 t\\=1=1.5,h=-2 5\n" +
		"my\\ readings,device=a\\,b,gateway=gw\\ 1 t\\=1=3 5\n" +
		"my\\ readings,device=c,gateway=gw\\ 1 t=1e+21 6\n"
	if string(body) != want || skipped != 0 {
		t.Errorf("got (skipped %d)\n%s\nwant\n%s", skipped, body, want)
	}
	var lines int
	for sc := bufio.NewScanner(bytes.NewReader(body)); sc.Scan(); {
		lines++
	}
	if lines != 3 {
		t.Errorf("%d lines", lines)
	}
}

func TestUplink_StoreFailureDoesNotStopIt(t *testing.T) {
	// A store that fails (here: closed under it) is reported and tried
	// again; Run goes on until its context ends, and returns nil. With
	// live_first and a backlog of several batches, the failure comes
	// where the live stream is recorded, before any batch.
	for _, catchUp := range []CatchUp{OldestFirst, LiveFirst} {
		t.Run(catchUp.String(), func(t *testing.T) {
			dir := t.TempDir()
			s, err := buffer.Open(buffer.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			c := cursor(t, s)
			w := buffer.NewWriter(s, buffer.WriterOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- w.Run(ctx) }()
			res := make(chan buffer.Result, 1)
			var rs []buffer.Reading
			for i := range 300 {
				rs = append(rs, reading(i))
			}
			if err := w.Submit(ctx, rs, func(r buffer.Result) { res <- r }); err != nil {
				t.Fatal(err)
			}
			<-res
			cancel()
			<-done
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			up := newUpstream(t)
			opts := testOptions(up.srv.URL, dir)
			opts.CatchUp, opts.BatchReadings = catchUp, 100
			u, err := New(c, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel = context.WithCancel(context.Background())
			go func() { done <- u.Run(ctx) }()
			waitFor(t, "the failure in status", func() bool {
				st := u.Status()
				return strings.Contains(st.LastError, "DB Closed") && st.NextAttempt != nil
			})
			select {
			case err := <-done:
				t.Fatalf("Run returned %v while its context runs", err)
			default:
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v, want nil", err)
			}
		})
	}
}

func TestUplink_ReconfigureSendsTheWaitingBatchAtOnce(t *testing.T) {
	// The URL is wrong (404, tried again with a long backoff); once it
	// is fixed the waiting batch goes at once, whole, under its id.
	dir := t.TempDir()
	s := openStore(t, dir)
	wrong := newUpstream(t, "404", "404", "404", "404", "404", "404", "404", "404")
	right := newUpstream(t)
	s.add(t, 0, 100)
	opts := testOptions(wrong.srv.URL, dir)
	opts.RetryWaitMin, opts.RetryWaitMax = time.Minute, time.Hour
	u, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	waitFor(t, "the 404 in status", func() bool {
		st := u.Status()
		return strings.Contains(st.LastError, "404") && st.NextAttempt != nil
	})
	opts.URL = right.srv.URL
	opts.RetryWaitMin, opts.RetryWaitMax = 0, 0 // defaults
	start := time.Now()
	if err := u.Reconfigure(opts); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the outbox to drain", func() bool { return s.Outbox().Pending() == 0 })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("sent %v after the fix; want at once, not after the backoff", d)
	}
	keys, lines := right.received()
	if fmt.Sprint(keys) != "[gw1-0]" {
		t.Errorf("batches %v, want gw1-0", keys)
	}
	sameLines(t, lines, wantLines("gw1", 0, 100))
	if st := u.Status(); st.URL != right.srv.URL || st.SentBatches != 1 {
		t.Errorf("status: %+v", st)
	}
	if err := u.Reconfigure(Options{}); err == nil {
		t.Error("Reconfigure without a URL: no error")
	}
}

func TestUplink_RedirectIsNotFollowed(t *testing.T) {
	// Go would follow a 301 with a GET that carries no batch; a 2xx to
	// it would pass for the batch taken. The batch goes again instead,
	// and the status says where the URL points.
	_, up, u := sendAll(t, 10, []string{"301", "429-0", "ok"}, nil)
	keys, _ := up.received()
	if fmt.Sprint(keys) != "[gw1-0]" {
		t.Errorf("batches %v, want gw1-0", keys)
	}
	up.mu.Lock()
	at := up.attempts
	up.mu.Unlock()
	if len(at) != 3 {
		t.Fatalf("%d requests, want 3 (301, 429, 204)", len(at))
	}
	if d := at[2].Sub(at[1]); d < 90*time.Millisecond {
		t.Errorf("waited %v after Retry-After: 0; want the least backoff, 100 ms", d)
	}
	if st := u.Status(); !strings.Contains(st.LastError, "429") || st.Retries != 2 {
		t.Errorf("status: %+v", st)
	}
}

func TestUplink_UnsentSurvivesAgePruningAndIsSentLater(t *testing.T) {
	// The upstream is down while retention by age removes the raw
	// readings; once it answers, every reading still goes up: the outbox
	// keeps its own copy of what is unsent.
	dir := t.TempDir()
	st, err := buffer.Open(buffer.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := cursor(t, st)
	w := buffer.NewWriter(st, buffer.WriterOptions{Retention: buffer.RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	s := &store{Store: st, cur: c, w: w}
	s.add(t, 0, 400) // readings of 2026-09-21
	up := newUpstream(t, "503", "503", "503", "503", "503", "503")
	u, err := New(c, testOptions(up.srv.URL, dir))
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	waitFor(t, "the upstream to fail", func() bool { return u.Status().Retries > 0 })

	// Ten days later a new reading comes, and retention at that time
	// removes the 400 older than raw_max_age.
	now := time.Unix(0, testEpoch).Add(10 * 24 * time.Hour)
	recent := buffer.Reading{Device: "d9", Metric: "t", TS: now.Add(-time.Hour).UnixNano(), Value: 1}
	res := make(chan buffer.Result, 1)
	if err := w.Submit(ctx, []buffer.Reading{recent}, func(r buffer.Result) { res <- r }); err != nil {
		t.Fatal(err)
	}
	<-res
	if err := w.Prune(ctx, now); err != nil {
		t.Fatal(err)
	}
	if n := st.ReadingCount(); n != 1 {
		t.Fatalf("raw readings after pruning: %d, want 1", n)
	}
	waitFor(t, "the outbox to drain once the upstream answers", func() bool { return c.Outbox().Pending() == 0 })
	_, lines := up.received()
	want := append(wantLines("gw1", 0, 400), fmt.Sprintf("readings,device=d9,gateway=gw1 t=1 %d", recent.TS))
	sameLines(t, lines, want)
	if got := st.DroppedUnsent(); got != 0 {
		t.Errorf("dropped unsent: %d, want 0", got)
	}
}

// TestUplink_SkipsAnOutboxEntryThatCannotBeRead stores three commits of
// 100 readings (three outbox entries), spoils the middle entry on disk, and
// sends: the first and last hundred arrive, the spoilt entry is parked
// with the reason and counted, and the outbox drains.
func TestUplink_SkipsAnOutboxEntryThatCannotBeRead(t *testing.T) {
	dir := t.TempDir()
	func() {
		s := startStore(t, dir)
		defer s.close(t)
		for c := range 3 {
			s.add(t, c*100, 100)
		}
	}()
	// The entry of readings 100 to 199, key 'O' + its first sequence
	// number (docs/storage.md), overwritten with bytes that do not decode.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	key := binary.BigEndian.AppendUint64([]byte{'O'}, 100)
	if err := db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(key); err != nil {
			return fmt.Errorf("the entry of reading 100: %w", err)
		}
		return txn.Set(key, []byte{1, 0xff, 0xff, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, dir)
	up := newUpstream(t)
	u := startAndDrain(t, s, testOptions(up.srv.URL, dir))
	keys, lines := up.received()
	if fmt.Sprint(keys) != "[gw1-0 gw1-200]" {
		t.Errorf("accepted batches %v, want gw1-0 and gw1-200", keys)
	}
	sameLines(t, lines, append(wantLines("gw1", 0, 100), wantLines("gw1", 200, 100)...))
	st := u.Status()
	if st.ParkedBatches != 1 || st.ParkedReadings != 100 || !strings.Contains(st.LastError, "outbox entry 100 cannot be read (readings 100 to 199 are not sent)") {
		t.Errorf("status: %+v", st)
	}
	parked := filepath.Join(dir, "parked", "gw1-outbox-100")
	if v, err := os.ReadFile(parked + ".entry"); err != nil || !bytes.Equal(v, []byte{1, 0xff, 0xff, 0xff}) {
		t.Errorf("parked entry: %x, %v", v, err)
	}
	if msg, err := os.ReadFile(parked + ".error"); err != nil || !strings.Contains(string(msg), "bad outbox entry") {
		t.Errorf("parked reason: %q, %v", msg, err)
	}
	// The readings themselves are still in the store.
	if n := s.ReadingCount(); n != 300 {
		t.Errorf("%d readings stored, want 300", n)
	}
}

// The unit of each series goes upstream as it is in the store when the
// batch is read: a tag in line protocol, none for a series without one.
func TestUplink_SendsTheUnitOfEachSeries(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newUpstream(t)
	ts := time.Now().UnixNano()
	ch := make(chan buffer.Result, 1)
	rs := []buffer.Reading{
		{Device: "kitchen door", Metric: "t", TS: ts, Value: 21.5, Unit: "°C"},
		{Device: "kitchen door", Metric: "open", TS: ts, Value: 1},
		{Device: "kitchen door", Metric: "t", TS: ts + 1, Value: 21.6}, // brings no unit: °C stays
	}
	if err := s.w.Submit(context.Background(), rs, func(r buffer.Result) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	if res := <-ch; res.Err != nil || res.Stored != len(rs) {
		t.Fatalf("store: %+v", res)
	}
	opts := testOptions(up.srv.URL, dir)
	opts.Gzip = false
	u, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	waitFor(t, "the outbox to drain", func() bool { return s.Outbox().Pending() == 0 })
	_, lines := up.received()
	want := []string{
		fmt.Sprintf(`readings,device=kitchen\ door,gateway=gw1,unit=°C t=21.5 %d`, ts),
		fmt.Sprintf(`readings,device=kitchen\ door,gateway=gw1 open=1 %d`, ts),
		fmt.Sprintf(`readings,device=kitchen\ door,gateway=gw1,unit=°C t=21.6 %d`, ts+1),
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("got\n%q\nwant\n%q", lines, want)
	}
}
