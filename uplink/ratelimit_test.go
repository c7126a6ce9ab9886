package uplink

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestUplink_MaxBytesPerSecond drains an outbox through a real HTTP
// server with a cap of 20,000 bytes a second and two batches of about
// 23,000 bytes, bigger than the bucket of one second's worth, the first attempt
// refused: every batch arrives, and the bodies posted (every attempt
// counted, as the server got them) never ran ahead of the cap, the
// bucket's second excepted.
func TestUplink_MaxBytesPerSecond(t *testing.T) {
	const bps = 20_000
	dir := t.TempDir()
	s := openStore(t, dir)
	s.add(t, 0, 1400)
	up := &upstream{t: t, script: []string{"500"}, lines: make(map[string][]string)}
	var mu sync.Mutex // guards bodies
	var bodies []int64
	up.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		bodies = append(bodies, r.ContentLength)
		mu.Unlock()
		up.serve(w, r)
	}))
	t.Cleanup(up.srv.Close)
	opts := testOptions(up.srv.URL, dir)
	opts.Gzip = false
	opts.BatchReadings = 700
	opts.MaxBytesPerSecond = bps

	start := time.Now()
	startAndDrain(t, s, opts)
	elapsed := time.Since(start)

	_, lines := up.received()
	sameLines(t, lines, wantLines("gw1", 0, 1400))
	mu.Lock()
	defer mu.Unlock()
	var total int64
	for _, n := range bodies {
		total += n
	}
	if len(bodies) != 3 || bodies[0] != bodies[1] || bodies[1] <= bps {
		t.Fatalf("bodies posted %v: want the first refused and sent again, then one more, each over %d bytes", bodies, bps)
	}
	// A token bucket of one second's worth lets through at most that
	// second plus the cap times the time since the start.
	if limit := bps + int64(elapsed.Seconds()*bps); total > limit {
		t.Errorf("%d bytes posted in %s: over the cap (at most %d)", total, elapsed.Round(time.Millisecond), limit)
	}
	t.Logf("%d bytes in %d requests in %s: %.0f bytes/s after the first second's worth", total, len(bodies),
		elapsed.Round(time.Millisecond), float64(total-bps)/elapsed.Seconds())
}

// TestByteLimiter_WaitEndsWithItsContext: a wait for more than the
// bucket holds returns the context's error once the context ends, and
// gives back what it had not used.
func TestByteLimiter_WaitEndsWithItsContext(t *testing.T) {
	l := newByteLimiter(1000)
	if err := l.wait(context.Background(), 1000); err != nil { // empties the bucket
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.wait(ctx, 1<<20); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait for 1 MiB at 1000 bytes/s: got %v, want %v", err, context.DeadlineExceeded)
	}
	if err := newByteLimiter(0).wait(context.Background(), 1<<40); err != nil {
		t.Errorf("no limit: got %v", err)
	}
}
