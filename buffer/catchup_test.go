package buffer

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// writeCommits stores n commits of per readings each, the ith reading of
// all stamped at t0 plus i seconds, and checkpoints them, so that only the
// upstreams hold the log's entries.
func writeCommits(t *testing.T, w *Writer, n, per int, t0 time.Time) {
	t.Helper()
	for c := range n {
		var rs []Reading
		for i := range per {
			k := c*per + i
			rs = append(rs, Reading{Device: "d", Metric: "m", TS: t0.Add(time.Duration(k) * time.Second).UnixNano(), Value: float64(k)})
		}
		write(t, w, rs...)
	}
	if err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCursor_LiveStreamAcrossReopen sends a live stream ahead of the
// backlog: its place and batch outlast a reopen, it moves only while it
// has sent nothing, and once the backlog reaches the mark the cursor goes
// on from the live stream's place and the entries behind it go.
func TestCursor_LiveStreamAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	upstream(t, s)
	w := NewWriter(s, WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	writeCommits(t, w, 10, 10, time.Unix(1_700_000_000, 0))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	c := upstream(t, s)
	if err := c.SetOutboxBatch(20, 0); err != nil {
		t.Fatal(err)
	}
	// Not into the backlog's batch in flight.
	if err := c.AimLive(15); err != nil {
		t.Fatal(err)
	}
	if o := c.Outbox(); o.CatchingUp() {
		t.Fatalf("aimed inside the batch in flight: %+v", o)
	}
	if err := c.AimLive(70); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLiveBatch(80, 7); err != nil {
		t.Fatal(err)
	}
	// Not taken: aimed again, at newer readings, its batch forgotten.
	if err := c.AimLive(80); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLiveBatch(90, 8); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, s)
	c = upstream(t, s)
	want := OutboxState{End: 100, Cursor: 0, BatchEnd: 20, Mark: 80, Live: 80, LiveBatchEnd: 90, LiveBatchNote: 8}
	if o := c.Outbox(); o != want {
		t.Fatalf("after reopen: %+v, want %+v", o, want)
	}
	if err := c.AdvanceLive(90); err != nil {
		t.Fatal(err)
	}
	if err := c.AimLive(95); err != nil {
		t.Fatal(err)
	}
	if o := c.Outbox(); o.Mark != 80 || o.Live != 90 || o.Pending() != 90 {
		t.Fatalf("after 10 live readings sent: %+v (pending %d), want mark 80, live 90, 90 pending", o, o.Pending())
	}
	if err := c.AdvanceOutbox(20); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 8 {
		t.Errorf("%d log entries after 20 of the backlog were sent, want 8", n)
	}

	s = reopen(t, s)
	defer s.Close()
	c = upstream(t, s)
	if o := c.Outbox(); o.Cursor != 20 || o.Mark != 80 || o.Live != 90 || o.BatchEnd != 0 || o.LiveBatchEnd != 0 {
		t.Fatalf("after reopen: %+v, want cursor 20, mark 80, live 90", o)
	}
	if err := c.AdvanceOutbox(80); err != nil {
		t.Fatal(err)
	}
	want = OutboxState{End: 100, Cursor: 90}
	if o := c.Outbox(); o != want {
		t.Fatalf("backlog at the mark: %+v, want %+v", o, want)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 1 {
		t.Errorf("%d log entries once the two merged, want 1 (readings 90 to 99)", n)
	}
	if err := c.SetLiveBatch(100, 0); err != ErrNoLiveStream {
		t.Errorf("SetLiveBatch after the merge: %v, want ErrNoLiveStream", err)
	}
}

// TestCursor_DropMovesOnlyItsCursor drops readings of one upstream: its
// cursor moves and counts them, the other upstream's stays, and entries go
// only once both passed them. With a live stream, only the backlog goes.
func TestCursor_DropMovesOnlyItsCursor(t *testing.T) {
	s, w := testStore(t, "")
	up, other := namedCursor(t, s, "up"), namedCursor(t, s, "other")
	t0 := time.Unix(1_700_000_000, 0)
	writeCommits(t, w, 10, 10, t0)

	d, err := up.Drop(35)
	if err != nil {
		t.Fatal(err)
	}
	if d.From != 0 || d.To != 35 || d.OldestTS != t0.UnixNano() || d.NewestTS != t0.Add(34*time.Second).UnixNano() {
		t.Errorf("Drop(35) = %+v, want readings 0 to 34, stamped t0 to t0+34s", d)
	}
	if o := up.Outbox(); o.Cursor != 35 || o.Dropped != 35 {
		t.Errorf("up after the drop: %+v, want cursor 35, 35 dropped", o)
	}
	if o := other.Outbox(); o.Cursor != 0 || o.Dropped != 0 {
		t.Errorf("other after up's drop: %+v, want cursor 0, none dropped", o)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 10 {
		t.Errorf("%d log entries while other has sent none, want 10", n)
	}
	if err := other.AdvanceOutbox(100); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 7 {
		t.Errorf("%d log entries once other sent all, want 7 (from reading 30 on)", n)
	}

	if err := up.AimLive(80); err != nil {
		t.Fatal(err)
	}
	if err := up.AdvanceLive(90); err != nil {
		t.Fatal(err)
	}
	if d, err := up.Drop(1000); err != nil || d.From != 35 || d.To != 80 {
		t.Fatalf("Drop(1000) with a live stream from 80 = %+v, %v; want readings 35 to 79", d, err)
	}
	if o := up.Outbox(); o.Cursor != 90 || o.CatchingUp() || o.Dropped != 80 {
		t.Errorf("up after dropping its backlog: %+v, want cursor 90 (merged), 80 dropped", o)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 1 {
		t.Errorf("%d log entries, want 1 (readings 90 to 99)", n)
	}
}

// TestCursor_TrimBacklog drops what is beyond an age, then beyond a size.
func TestCursor_TrimBacklog(t *testing.T) {
	s, w := testStore(t, "")
	up := namedCursor(t, s, "up")
	now := time.Unix(1_700_000_000, 0)
	writeCommits(t, w, 10, 10, now.Add(-100*time.Second))

	d, err := up.TrimBacklog(BacklogLimit{MaxAge: 60 * time.Second}, now)
	if err != nil || d.From != 0 || d.To != 40 {
		t.Fatalf("TrimBacklog(60s) = %+v, %v; want readings 0 to 39, older than 60 s", d, err)
	}
	if d, _ := up.TrimBacklog(BacklogLimit{MaxAge: 60 * time.Second}, now); d.Readings() != 0 {
		t.Errorf("again: dropped %+v", d)
	}
	// Six entries of about the same size are left: keep about half.
	size, err := up.overBytes(1 << 40)
	if err != nil || size != 0 {
		t.Fatalf("overBytes(1 TiB) = %d, %v", size, err)
	}
	var total int64
	for lim := int64(1); ; lim *= 2 {
		if n, _ := up.overBytes(lim); n == 0 {
			total = lim
			break
		}
	}
	d, err = up.TrimBacklog(BacklogLimit{MaxBytes: total / 2}, now)
	if err != nil || d.From != 40 || d.To <= 40 || d.To >= 100 || d.To%10 != 0 {
		t.Fatalf("TrimBacklog(%d bytes) = %+v, %v; want whole entries from 40 on, not all", total/2, d, err)
	}
	if o := up.Outbox(); o.Cursor != d.To || o.Dropped != d.To {
		t.Errorf("after the trims: %+v, want cursor and dropped %d", o, d.To)
	}
}

// TestLog_DiskCapCountsOnlyWhatALiveStreamHadNotSent drops, for the disk
// cap, readings of which the live stream had sent some: only the backlog's
// count as dropped, and the cursor goes on from the live stream's place.
func TestLog_DiskCapCountsOnlyWhatALiveStreamHadNotSent(t *testing.T) {
	s, w := testStore(t, "")
	up := namedCursor(t, s, "up")
	writeCommits(t, w, 10, 10, time.Unix(1_700_000_000, 0))
	if err := up.AimLive(50); err != nil {
		t.Fatal(err)
	}
	if err := up.AdvanceLive(70); err != nil {
		t.Fatal(err)
	}
	d, err := s.DropOutbox(60)
	if err != nil || d.From != 0 || d.To != 60 {
		t.Fatalf("DropOutbox(60) = %+v, %v; want readings 0 to 59", d, err)
	}
	want := OutboxState{End: 100, Cursor: 70, Dropped: 50}
	if o := up.Outbox(); o != want {
		t.Errorf("after the drop: %+v, want %+v (the 10 sent live are not dropped ones)", o, want)
	}
	if got := s.DroppedUnsent(); got != 50 {
		t.Errorf("dropped unsent %d, want 50", got)
	}
}

// BenchmarkCursor_OverBytes measures what holding a backlog to a size
// costs: the walk over the log's keys that TrimBacklog makes every few
// seconds, here over 1,000 entries of 1,000 readings.
func BenchmarkCursor_OverBytes(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	up := upstream(b, s)
	w := NewWriter(s, WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t0 := time.Unix(1_700_000_000, 0)
	for c := range 1000 {
		rs := make([]Reading, 1000)
		for i := range rs {
			rs[i] = Reading{Device: "d" + strconv.Itoa(i%100), Metric: "m", TS: t0.Add(time.Duration(c*10+i/100) * time.Second).UnixNano(), Value: float64(i)}
		}
		ch := make(chan Result, 1)
		if err := w.Submit(ctx, rs, func(r Result) { ch <- r }); err != nil {
			b.Fatal(err)
		}
		if r := <-ch; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if n, err := up.overBytes(1 << 20); err != nil || n == 0 {
			b.Fatalf("overBytes = %d, %v", n, err)
		}
	}
}
