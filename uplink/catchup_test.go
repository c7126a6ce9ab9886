package uplink

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// outage is an upstream that answers 503 while down, and records every
// batch it takes, in order, duplicates included.
type outage struct {
	mu      sync.Mutex
	down    bool
	delay   time.Duration // before taking a batch
	tried   []string      // Idempotency-Keys of the refused attempts
	keys    []string      // and of the batches taken
	batches [][]string
	srv     *httptest.Server
}

func newOutage(t *testing.T) *outage {
	o := &outage{down: true}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return
		}
		key := r.Header.Get("Idempotency-Key")
		o.mu.Lock()
		delay := o.delay
		o.mu.Unlock()
		time.Sleep(delay)
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.down {
			o.tried = append(o.tried, key)
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		o.keys = append(o.keys, key)
		o.batches = append(o.batches, strings.Split(strings.TrimSpace(string(b)), "\n"))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *outage) setDown(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

func (o *outage) triedKey(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.tried, key)
}

// taken returns the keys and lines of the batches taken, in order.
func (o *outage) taken() ([]string, [][]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.keys), slices.Clone(o.batches)
}

// checkOnce checks that lines hold each of want exactly once.
func checkOnce(t *testing.T, batches [][]string, want []string) {
	t.Helper()
	seen := make(map[string]int)
	for _, b := range batches {
		for _, l := range b {
			seen[l]++
		}
	}
	for _, l := range want {
		if seen[l] != 1 {
			t.Errorf("line %q arrived %d times, want once", l, seen[l])
			return
		}
		delete(seen, l)
	}
	for l := range seen {
		t.Errorf("unexpected line %q", l)
		return
	}
}

// startUplink makes an uplink of opts on s's cursor and runs it until the
// test ends.
func startUplink(t *testing.T, s *store, opts Options) *Uplink {
	t.Helper()
	u, err := New(s.cur, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUplink(t, u)
	return u
}

// TestUplink_LiveFirstAfterOutage stores readings while the upstream is
// down; once it is back, the first batch it takes holds the newest
// readings, the backlog follows, readings stored meanwhile go ahead of
// it, and every reading arrives once.
func TestUplink_LiveFirstAfterOutage(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newOutage(t)
	opts := testOptions(up.srv.URL, dir)
	opts.CatchUp = LiveFirst
	u := startUplink(t, s, opts)
	for i := 0; i < 1100; i += 100 {
		s.add(t, i, 100)
		if i == 0 {
			waitFor(t, "a batch to be refused", func() bool { return u.Status().Retries > 0 })
		}
	}
	// Tried while down: the newest batch.
	waitFor(t, "the newest readings to be tried", func() bool { return up.triedKey("gw1-1000") })
	// Back, and slow enough that the backlog takes a while.
	up.mu.Lock()
	up.down, up.delay = false, 20*time.Millisecond
	up.mu.Unlock()
	waitFor(t, "the first batch", func() bool { keys, _ := up.taken(); return len(keys) > 0 })
	s.add(t, 1100, 100)
	waitFor(t, "everything to arrive", func() bool { return s.cur.Outbox().Pending() == 0 })

	keys, batches := up.taken()
	if keys[0] != "gw1-1000" {
		t.Errorf("batches taken after the outage %v, want gw1-1000 (the newest) first", keys)
	}
	sameLines(t, batches[0], wantLines("gw1", 1000, 100))
	t.Logf("batches taken: %v", keys)
	if i, j := slices.Index(keys, "gw1-1100"), slices.Index(keys, "gw1-900"); i > j {
		t.Errorf("batches %v: the readings stored during the catch-up (gw1-1100) came after the backlog's last batch (gw1-900)", keys)
	}
	checkOnce(t, batches, wantLines("gw1", 0, 1200))
	if o := s.cur.Outbox(); o.CatchingUp() || o.Cursor != 1200 {
		t.Errorf("cursor after the catch-up: %+v, want 1200, no live stream", o)
	}

	// Live again: new readings go as before.
	s.add(t, 1200, 100)
	waitFor(t, "the next readings", func() bool { return s.cur.Outbox().Pending() == 0 })
	keys, _ = up.taken()
	if last := keys[len(keys)-1]; last != "gw1-1200" {
		t.Errorf("last batch %s, want gw1-1200", last)
	}
}

// TestUplink_LiveFirstAtStartWithBacklog: an uplink that starts with more
// than a batch pending sends the newest first.
func TestUplink_LiveFirstAtStartWithBacklog(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newOutage(t)
	up.setDown(false)
	s.add(t, 0, 500)
	opts := testOptions(up.srv.URL, dir)
	opts.CatchUp = LiveFirst
	startUplink(t, s, opts)
	waitFor(t, "the outbox to drain", func() bool { return s.cur.Outbox().Pending() == 0 })
	keys, batches := up.taken()
	if len(keys) != 5 || keys[0] != "gw1-400" || keys[1] != "gw1-0" {
		t.Errorf("batches %v, want gw1-400 first, then the backlog from gw1-0", keys)
	}
	checkOnce(t, batches, wantLines("gw1", 0, 500))
}

// TestUplink_OldestFirstByDefault: without live_first the backlog goes in
// the order it was stored.
func TestUplink_OldestFirstByDefault(t *testing.T) {
	_, up, _ := sendAll(t, 500, nil, nil)
	keys, _ := up.received()
	if fmt.Sprint(keys) != "[gw1-0 gw1-100 gw1-200 gw1-300 gw1-400]" {
		t.Errorf("batches %v, want them in order", keys)
	}
}

// TestUplink_MaxBacklogDropsOldest holds a down upstream's backlog to an
// age: the older readings, the batch being tried among them, are dropped
// from its cursor and counted, and the rest arrives.
func TestUplink_MaxBacklogDropsOldest(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	up := newOutage(t)
	s.add(t, 0, 1000) // 2026-09-21, a millisecond for each pair
	opts := testOptions(up.srv.URL, dir)
	opts.MaxBacklog = buffer.BacklogLimit{MaxAge: 100 * 24 * time.Hour}
	var trusted atomic.Bool
	opts.Trusted = trusted.Load
	if _, err := New(s, opts); err == nil {
		t.Error("max_backlog on an outbox that cannot drop: no error")
	}
	u := startUplink(t, s, opts)
	waitFor(t, "the first batch to be refused", func() bool { return up.triedKey("gw1-0") })
	if st := u.Status(); st.DroppedUnsent != 0 || st.PendingReadings != 1000 {
		t.Fatalf("nothing is over max_backlog yet: %+v", st)
	}
	// 100 days and 250 ms after the first reading: pairs 0 to 249 are
	// older, by a clock that is not trusted yet: nothing goes.
	later := time.Unix(0, testEpoch).Add(100*24*time.Hour + 250*time.Millisecond)
	if err := u.TrimBacklog(later); err != nil {
		t.Fatal(err)
	}
	if st := u.Status(); st.DroppedUnsent != 0 || st.PendingReadings != 1000 {
		t.Fatalf("max_backlog by age dropped readings by a clock not trusted: %+v", st)
	}
	trusted.Store(true)
	if err := u.TrimBacklog(later); err != nil {
		t.Fatal(err)
	}
	if st := u.Status(); st.DroppedUnsent != 500 || st.PendingReadings != 500 {
		t.Errorf("after the trim: dropped %d, pending %d; want 500 and 500", st.DroppedUnsent, st.PendingReadings)
	}
	up.setDown(false)
	waitFor(t, "the rest to arrive", func() bool { return s.cur.Outbox().Pending() == 0 })
	keys, batches := up.taken()
	if keys[0] != "gw1-500" {
		t.Errorf("batches %v, want gw1-500 first", keys)
	}
	checkOnce(t, batches, wantLines("gw1", 500, 500))
	if st := u.Status(); st.DroppedUnsent != 500 || st.SentReadings != 500 {
		t.Errorf("dropped %d, sent %d; want 500 and 500", st.DroppedUnsent, st.SentReadings)
	}
}

// TestUplink_LiveFirstAcrossRestart stops the gateway while the newest
// batch is being tried: after a restart that batch goes first, under the
// same id, and every reading arrives once.
func TestUplink_LiveFirstAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s := startStore(t, dir)
	up := newOutage(t)
	s.add(t, 0, 100)
	opts := testOptions(up.srv.URL, dir)
	opts.CatchUp = LiveFirst
	u, err := New(s.cur, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- u.Run(ctx) }()
	waitFor(t, "a batch to be refused", func() bool { return up.triedKey("gw1-0") })
	s.add(t, 100, 500)
	waitFor(t, "the newest readings to be tried", func() bool { return up.triedKey("gw1-500") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.close(t)

	s = openStore(t, dir)
	if o := s.cur.Outbox(); o.Mark != 500 || o.LiveBatchEnd != 600 || o.BatchEnd != 100 {
		t.Fatalf("after the restart: %+v, want the live batch 500–600 and the backlog's 0–100 recorded", o)
	}
	up.setDown(false)
	startUplink(t, s, opts)
	waitFor(t, "everything to arrive", func() bool { return s.cur.Outbox().Pending() == 0 })
	keys, batches := up.taken()
	if len(keys) < 2 || keys[0] != "gw1-500" || keys[1] != "gw1-0" {
		t.Errorf("batches %v, want gw1-500, then the backlog from gw1-0", keys)
	}
	checkOnce(t, batches, wantLines("gw1", 0, 600))
}
