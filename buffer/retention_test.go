package buffer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// logBuffer collects log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runRetention runs r until stop is called or the test ends.
func runRetention(t *testing.T, r *Retention) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("retention: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestRetention_DiskCapDropsOldestUnsent fills a store with the upstream
// down (nothing ever leaves the outbox) to several times a small disk
// cap, with retention running beside ingest as in the daemon. The data
// directory must stay under the cap, every commit must succeed, and the
// readings dropped unsent must be exactly those the outbox lost.
func TestRetention_DiskCapDropsOldestUnsent(t *testing.T) {
	const limit = 16 << 20
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20, Logger: log},
		WriterOptions{MaxReadings: 2000, SealCheck: time.Hour, Retention: RetentionPolicy{MaxDiskBytes: limit}})
	upstream(t, s)
	r := NewRetention(s, w, RetentionOptions{DiskCheck: 10 * time.Millisecond, Logger: log})
	stop := runRetention(t, r)

	rng := rand.New(rand.NewPCG(7, 7))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	// Long device names and random full-precision values: many bytes a
	// reading (the outbox entries carry a table of the names), so that
	// the cap is reached soon even under the race detector.
	devices := make([]string, 1000)
	for i := range devices {
		devices[i] = fmt.Sprintf("bridge-%04d-%s", i, strings.Repeat("x", 40))
	}
	var stored uint64
	var peak int64
	ts := base
	for after := 0; after < 20; {
		if s.DroppedUnsent() > 0 {
			after++ // batches stored after the first drop
		}
		if stored > 5_000_000 {
			t.Fatalf("%d readings stored and nothing dropped", stored)
		}
		rs := make([]Reading, 0, 2000)
		for i := range 2000 {
			rs = append(rs, Reading{Device: devices[i%len(devices)], Metric: "t", TS: ts, Value: rng.Float64()})
			if i%len(devices) == len(devices)-1 {
				ts += 1e9
			}
		}
		stored += uint64(write(t, w, rs...).Stored)
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, st.DiskBytes)
		// As the status asks: the oldest reading it keeps must follow
		// what the disk cap deletes (checked below).
		if _, _, err := s.OldestReading(); err != nil {
			t.Fatal(err)
		}
	}
	// The last batches may have taken the directory over the high mark,
	// or a pass may be under way (see below): retention, still running,
	// brings it back under the cap.
	var after int64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if after = st.DiskBytes; after <= limit || time.Now().After(deadline) {
			break
		}
	}
	stop()
	o := upstream(t, s).Outbox()
	dropped := s.DroppedUnsent()
	t.Logf("stored %d readings; peak %d bytes (cap %d); dropped unsent %d; pending %d; removed %d raw",
		stored, peak, limit, dropped, o.Pending(), w.Stats().PrunedReadings)
	if o.End != stored {
		t.Errorf("outbox end: got %d, want %d stored", o.End, stored)
	}
	if dropped == 0 || dropped != o.Cursor {
		t.Errorf("dropped unsent: got %d, want the cursor %d (> 0): nothing was sent", dropped, o.Cursor)
	}
	left := readOutbox(t, s)
	if uint64(len(left)) != o.Pending() || (len(left) > 0 && left[0].Seq != o.Cursor) {
		t.Errorf("outbox after drops: %d readings from %d, want %d from %d", len(left), left[0].Seq, o.Pending(), o.Cursor)
	}
	if before, err := s.ReadOutbox(0, 1, nil); err != nil || len(before) != 1 || before[0].Seq != o.Cursor {
		t.Errorf("outbox from 0: got %v, %v; want the first reading after the cursor", before, err)
	}
	// Retention keeps the directory under the cap. During a pass it may
	// pass it: a compaction writes its new tables before it deletes
	// the old, and in a store this small one table of the base level
	// spans every series, so the compaction into the bottom level
	// rewrites all of it. The directory then holds the store before the
	// deletes (under the cap) and after them, and the level 0 tables that
	// arrive meanwhile (Badger stalls writes at 8): at most twice the cap
	// and 8 memtables (measured: 1.41 to 1.57 times the cap). Larger
	// stores go less far over: BenchmarkRetention_DiskCapOvershoot.
	if peak > 2*limit+8<<20 {
		t.Errorf("data directory peaked at %d bytes, over twice the cap of %d and 8 memtables", peak, limit)
	}
	if after > limit {
		t.Errorf("data directory 15 s after the last write: %d bytes; want under the cap of %d", after, limit)
	}
	oldest, ok, err := s.OldestReading()
	if want, _, wantOK, spanErr := s.ReadingSpan(); err != nil || spanErr != nil || ok != wantOK || oldest != want {
		t.Errorf("oldest reading %d (%v, %v), the tree's %d (%v, %v)", oldest, ok, err, want, wantOK, spanErr)
	}
	if got, want := s.ReadingCount(), stored-w.Stats().PrunedReadings; got != want {
		t.Errorf("reading count: got %d, want %d stored less %d removed", got, want, w.Stats().PrunedReadings)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"disk cap: dropped readings that were never sent upstream\"") {
		t.Errorf("no warning about dropped unsent readings in the log")
	}
	if t.Failed() {
		t.Log(logs.String())
	}
}

// TestRetention_ClockPausesAgeRetention steps a Retention by hand with an
// injected clock: before the build date, not synchronised (with no
// device's timestamp to check it against), or ten years ahead of the
// newest reading, nothing is pruned and the status says why; with a
// trusted clock the old days go.
func TestRetention_ClockPausesAgeRetention(t *testing.T) {
	floor := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clk := &testClock{now: floor, sync: SyncYes}
	s, w, _ := testStoreClock(t, clk, floor, WriterOptions{SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 7 * 24 * time.Hour}})
	clock := floor
	r := NewRetention(s, w, RetentionOptions{Now: func() time.Time { return clock }})
	ctx := context.Background()
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for h := range 20 * 24 { // one an hour for twenty days
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(h)*3600e9, Value: float64(h)})
	}
	write(t, w, rs...)
	newest := time.Unix(0, rs[len(rs)-1].TS)
	for _, tc := range []struct {
		now    time.Time
		sync   SyncState
		reason string
	}{
		{floor.Add(-24 * time.Hour), SyncYes, "is before this build's date (2026-06-01T00:00:00Z)"},
		{newest.Add(time.Hour), SyncNo, "the clock is not trusted; not synchronised (NTP)"},
		{newest.Add(10 * 365 * 24 * time.Hour), SyncYes, "is more than raw_max_age (168h0m0s) ahead of the newest reading stored (" + newest.UTC().Format(time.RFC3339) + ")"},
	} {
		clk.set(tc.now, tc.sync)
		if err := r.RunOnce(ctx, tc.now); err != nil {
			t.Fatalf("at %s: %v", tc.now, err)
		}
		st, err := r.Status()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(st.PausedReason, tc.reason) || st.RemovedReadings != 0 || s.ReadingCount() != uint64(len(rs)) {
			t.Errorf("at %s: paused %q, removed %d, %d readings left; want paused (%q), nothing removed", tc.now, st.PausedReason, st.RemovedReadings, s.ReadingCount(), tc.reason)
		}
	}
	clock = newest.Add(time.Hour)
	clk.set(clock, SyncYes)
	if err := r.RunOnce(ctx, clock); err != nil {
		t.Fatal(err)
	}
	st, err := r.Status()
	if err != nil {
		t.Fatal(err)
	}
	// The clock is at day 20, 00:00: the cut is at day 13, days 0 to 12
	// go.
	if st.PausedReason != "" || st.RemovedReadings != 13*24 || s.ReadingCount() != 7*24 {
		t.Errorf("with a sane clock: paused %q, removed %d, %d left; want 312 removed, 168 left", st.PausedReason, st.RemovedReadings, s.ReadingCount())
	}
	if st.OldestReading == nil || st.OldestReading.UnixNano() != base+13*24*3600e9 || !st.NewestReading.Equal(newest) || st.LastRun == nil || !st.LastRun.Equal(clock) {
		t.Errorf("status: %+v", st)
	}
	// The oldest reading (day 13, 00:00) expires now: the next run is as
	// soon as allowed, not in an hour, and takes exactly that one.
	if got, want := r.nextPrune, clock.Add(minPruneGap); !got.Equal(want) {
		t.Errorf("next prune: got %s, want %s", got, want)
	}
	if err := r.PruneAge(ctx, r.nextPrune); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().PrunedReadings; got != 13*24+1 {
		t.Errorf("after the expiry of the oldest reading: %d removed, want %d", got, 13*24+1)
	}
}

// TestPrune_StepsLetCommitsThrough prunes many thousands of buckets while
// another goroutine keeps writing: the prune runs in steps, commits land
// between them, and none fails.
func TestPrune_StepsLetCommitsThrough(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 2, SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for i := range 4 * pruneChunkKeys * 2 { // two readings a bucket: 4 steps of buckets
		rs = append(rs, Reading{Device: "d", Metric: "m" + string(rune('a'+i%8)), TS: base + int64(i)*1e9, Value: float64(i)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+3*day)); err != nil {
		t.Fatal(err)
	}
	// A recent reading: the clock is not far ahead of the newest one.
	write(t, w, Reading{Device: "live", Metric: "m", TS: base + 10*day - 1e9, Value: 1})
	stop := make(chan struct{})
	commits := make(chan int, 1)
	go func() {
		n := 1
		for ts := base + 10*day; ; ts += 1e9 {
			select {
			case <-stop:
				commits <- n
				return
			default:
			}
			ch := make(chan Result, 1)
			if err := w.Submit(ctx, []Reading{{Device: "live", Metric: "m", TS: ts, Value: 1}}, func(r Result) { ch <- r }); err != nil {
				t.Error(err)
			}
			if res := <-ch; res.Err != nil {
				t.Errorf("commit during the prune: %v", res.Err)
			}
			n++
		}
	}()
	t0 := time.Now()
	if err := w.Prune(ctx, time.Unix(0, base+10*day+day/2)); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	close(stop)
	n := <-commits
	// While readings come in, the prune rests after each step: its steps
	// take about 1/(pruneRest+1) of the time it runs (without the rests,
	// nine tenths), the rest is ingest's.
	if busy := time.Duration(w.pruneBusy.Load()); busy*2 > wall {
		t.Errorf("prune steps took %s of the %s the prune ran while readings came in; want half at most (a hundredth or so expected)", busy, wall)
	}
	if got := w.Stats().PrunedReadings; got != uint64(len(rs)) {
		t.Errorf("pruned %d readings, want %d", got, len(rs))
	}
	if got := s.ReadingCount(); got != uint64(n) {
		t.Errorf("reading count: got %d, want the %d live ones", got, n)
	}
	if n < 4 {
		t.Errorf("%d commits while pruning in 4 or more steps; want one between each", n)
	}
}

// TestStore_DropOutboxWhileABatchIsInFlight drops the oldest entries while
// the uplink is sending them; when the upstream then takes the batch, its
// readings are no longer counted as dropped, and the cursor never goes
// back.
func TestStore_DropOutboxWhileABatchIsInFlight(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{})
	upstream(t, s)
	for c := range 3 { // three commits, three entries of 10
		var rs []Reading
		for i := range 10 {
			rs = append(rs, Reading{Device: "d", Metric: "m", TS: int64(c*10+i) * 1e9, Value: 1})
		}
		write(t, w, rs...)
	}
	checkpoint(t, w)                                            // the disk cap drops only what is in runs: its tiers before checkpoint
	if err := upstream(t, s).SetOutboxBatch(5, 0); err != nil { // the uplink sends 0-4
		t.Fatal(err)
	}
	d, err := s.DropOutbox(15)
	if err != nil {
		t.Fatal(err)
	}
	if d.From != 0 || d.To != 20 || d.OldestTS != 0 || d.NewestTS != 19e9 || s.DroppedUnsent() != 20 {
		t.Fatalf("drop: got %+v, %d dropped; want 0 to 20 (two whole entries)", d, s.DroppedUnsent())
	}
	if err := upstream(t, s).AdvanceOutbox(5); err != nil { // the upstream took 0-4 after all
		t.Fatal(err)
	}
	if o := upstream(t, s).Outbox(); o.Cursor != 20 || o.Pending() != 10 || s.DroppedUnsent() != 15 {
		t.Errorf("after the batch: cursor %d, pending %d, dropped %d; want 20, 10, 15", o.Cursor, o.Pending(), s.DroppedUnsent())
	}
	checkOutbox(t, readOutbox(t, s), 20, func() []Reading {
		var rs []Reading
		for i := 20; i < 30; i++ {
			rs = append(rs, Reading{Device: "d", Metric: "m", TS: int64(i) * 1e9, Value: 1})
		}
		return rs
	}())
}

// TestPrune_PerSeriesCountAndWindow keeps the newest N readings of each
// series, and the readings within a window of each series' newest one,
// even while the clock pauses retention by age (here: a clock before the
// readings and not synchronised, as on a board whose clock was never
// set).
func TestPrune_PerSeriesCountAndWindow(t *testing.T) {
	clk := &testClock{sync: SyncNo}
	s, w, _ := testStoreClock(t, clk, time.Time{}, WriterOptions{BucketSamples: 10, SealCheck: time.Hour,
		Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour, RawMaxReadingsPerSeries: 100, RawWindowFromLatest: 24 * time.Hour}})
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for i := range 500 { // counted: one a minute
		rs = append(rs, Reading{Device: "counted", Metric: "m", TS: base + int64(i)*60e9, Value: float64(i)})
	}
	for i := range 5 * 24 { // windowed: one an hour for five days
		rs = append(rs, Reading{Device: "windowed", Metric: "m", TS: base + int64(i)*3600e9, Value: float64(i)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+6*day)); err != nil {
		t.Fatal(err)
	}
	write(t, w, Reading{Device: "counted", Metric: "m", TS: base + 500*60e9, Value: 1}) // an open point
	err := w.Prune(ctx, time.Unix(0, base-day))
	if !errors.Is(err, ErrClockBehind) {
		t.Fatalf("prune with the clock behind: got %v, want ErrClockBehind", err)
	}
	for _, tc := range []struct {
		device string
		n      int
		first  int64
	}{
		{"counted", 100, base + 401*60e9},
		{"windowed", 25, base + (5*24-25)*3600e9},
	} {
		got, err := s.Readings(all(tc.device))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.n || got[0].TS != tc.first {
			t.Errorf("%s: %d readings, oldest %d; want %d from %d", tc.device, len(got), got[0].TS, tc.n, tc.first)
		}
	}
	if n := s.ReadingCount(); n != 125 {
		t.Errorf("reading count: got %d, want 125", n)
	}
}

// TestPrune_UnsentSurvivesAgePruning prunes nearly every raw reading by
// age while nothing was sent: the outbox still holds each one, in order,
// for the uplink to send when the upstream comes back.
func TestPrune_UnsentSurvivesAgePruning(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 10, SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	upstream(t, s)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for h := range 10 * 24 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(h)*3600e9, Value: float64(h)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+11*day)); err != nil {
		t.Fatal(err)
	}
	// The cut is at day 9, 12:00: all but the last 12 go.
	if err := w.Prune(ctx, time.Unix(0, base+10*day+day/2)); err != nil {
		t.Fatal(err)
	}
	if n := s.ReadingCount(); n != 12 {
		t.Errorf("raw readings after pruning: got %d, want 12", n)
	}
	checkOutbox(t, readOutbox(t, s), 0, rs)
	if s.DroppedUnsent() != 0 {
		t.Errorf("dropped unsent: got %d, want 0", s.DroppedUnsent())
	}
}

// TestStore_DefaultMaxDiskBytesIsRemembered computes the default cap from
// the free space once, and keeps it across calls and reopenings while the
// free space changes.
func TestStore_DefaultMaxDiskBytesIsRemembered(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	got, err := s.DefaultMaxDiskBytes()
	if err != nil {
		t.Fatal(err)
	}
	free := float64(fs.Bavail) * float64(fs.Bsize)
	want := min(int64(free*defaultDiskShare), MaxDefaultDiskBytes)
	if d := got - want; d < -want/50 || d > want/50 { // other files come and go meanwhile
		t.Errorf("default cap: got %d, want about %d (70%% of %.0f free, at most 32 GiB)", got, want, free)
	}
	// The free space shrinks; the cap stays.
	if err := os.WriteFile(filepath.Join(dir, "ballast"), make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if again, err := s.DefaultMaxDiskBytes(); err != nil || again != got {
		t.Errorf("after reopening: got %d, %v; want %d", again, err, got)
	}
}

// TestRetention_SmallPrunesAddUpToACompaction prunes a little at a time,
// as the hourly runs do: none compacts alone, but once what they removed
// since the last compaction reaches a tenth of the readings, the store is
// compacted, and the count (kept in the store) starts again.
func TestRetention_SmallPrunesAddUpToACompaction(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 199 * time.Hour}})
	r := NewRetention(s, w, RetentionOptions{})
	ctx := context.Background()
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for h := range 200 { // one an hour for 200 hours
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(h)*3600e9, Value: float64(h)})
	}
	write(t, w, rs...)
	// Each prune, four hours later than the one before, removes four
	// readings: 2% of them. The fifth brings the removed ones to a tenth.
	want := []int{0, 0, 0, 0, 1, 1, 1, 1, 1, 2}
	for i, c := range want {
		if err := r.PruneAge(ctx, time.Unix(0, base+int64(199+4*(i+1))*3600e9)); err != nil {
			t.Fatal(err)
		}
		if got := w.Stats().PrunedReadings; got != uint64(4*(i+1)) {
			t.Fatalf("after prune %d: %d readings removed, want %d", i+1, got, 4*(i+1))
		}
		if r.compactions != c {
			t.Fatalf("after prune %d (%d readings removed, %d stored): %d compactions, want %d", i+1, w.Stats().PrunedReadings, s.ReadingCount(), r.compactions, c)
		}
	}
	// The count is kept in the store, so that restarts do not reset it:
	// after the last compaction, nothing more was pruned.
	if err := r.PruneAge(ctx, time.Unix(0, base+int64(199+4*11)*3600e9)); err != nil {
		t.Fatal(err)
	}
	var stored uint64
	if err := s.db.View(func(txn *badger.Txn) (err error) { stored, err = getUint64(txn, encoding.MetaUncompacted); return err }); err != nil {
		t.Fatal(err)
	}
	if stored != 4 || s.Uncompacted() != 4 {
		t.Errorf("deleted since the last compaction: %d in the store, %d in memory; want 4", stored, s.Uncompacted())
	}
}

// TestPrune_GoesOnWhereTheLastStepStopped prunes a series with two and a
// half steps' worth of old buckets beside one with a few: each step goes
// on at the key where the one before stopped, inside a series too, and
// the pass removes exactly the old readings.
func TestPrune_GoesOnWhereTheLastStepStopped(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 2, SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	old := 5*pruneChunkKeys + 1 // readings: two a bucket
	var rs []Reading
	for i := range old {
		rs = append(rs, Reading{Device: "big", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i)})
	}
	for i := range 7 {
		rs = append(rs, Reading{Device: "small", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+3*day)); err != nil {
		t.Fatal(err)
	}
	recent := []Reading{
		{Device: "big", Metric: "m", TS: base + 10*day, Value: 1},
		{Device: "small", Metric: "m", TS: base + 10*day, Value: 2},
	}
	write(t, w, recent...)
	if err := w.Prune(ctx, time.Unix(0, base+10*day+time.Hour.Nanoseconds())); err != nil {
		t.Fatal(err)
	}
	if got, want := w.Stats().PrunedReadings, uint64(old+7); got != want {
		t.Errorf("pruned %d readings, want %d", got, want)
	}
	for _, r := range recent {
		got, err := s.Readings(all(r.Device))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].TS != r.TS {
			t.Errorf("%s after the prune: %v, want only its recent reading", r.Device, got)
		}
	}
}

// TestPrune_ReadingsAheadOfItsClockDoNotStopIt: a prune checks the clock
// at its first step and goes by it to the end, though readings newer than
// its clock (beyond the slack, even) are stored between its steps, as they
// are at a busy gateway during a long prune.
func TestPrune_ReadingsAheadOfItsClockDoNotStopIt(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 2, SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx := context.Background()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	old := now.Add(-5 * 24 * time.Hour).UnixNano()
	var rs []Reading
	for i := range 3 * pruneChunkKeys * 2 { // two readings a bucket: 3 steps
		rs = append(rs, Reading{Device: "d", Metric: "m" + string(rune('a'+i%8)), TS: old + int64(i)*1e9, Value: float64(i)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, now.Add(-2*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	write(t, w, Reading{Device: "live", Metric: "m", TS: now.Add(-time.Second).UnixNano(), Value: 1})
	var cur pruneCursor
	step := func() (more bool) {
		t.Helper()
		if err := w.do(ctx, func() (err error) { more, err = w.pruneStep(now, &cur); return err }); err != nil {
			t.Fatalf("prune step: %v", err)
		}
		return more
	}
	if !step() {
		t.Fatal("the first of 3 steps says it was the last")
	}
	write(t, w, Reading{Device: "live", Metric: "m", TS: now.Add(2 * time.Hour).UnixNano(), Value: 2})
	for step() {
	}
	if got := w.Stats().PrunedReadings; got != uint64(len(rs)) {
		t.Errorf("pruned %d readings, want %d", got, len(rs))
	}
	if got := s.ReadingCount(); got != 2 {
		t.Errorf("reading count: got %d, want the 2 live ones", got)
	}
	// The next prune sees the newest reading 2 hours ahead of its clock,
	// which it trusts: it runs.
	if err := w.Prune(ctx, now); err != nil {
		t.Errorf("next prune at the same clock: %v", err)
	}
}

// TestRetention_DiskCapKeptDuringALongPrune: a prune that rests while
// readings come in can run for minutes; the disk cap is still checked
// meanwhile, and the prune ends with every old reading gone.
func TestRetention_DiskCapKeptDuringALongPrune(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20, Logger: log},
		WriterOptions{BucketSamples: 2, SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for i := range 3 * pruneChunkKeys * 2 { // two readings a bucket: 3 steps
		rs = append(rs, Reading{Device: "d", Metric: "m" + string(rune('a'+i%8)), TS: base + int64(i)*1e9, Value: float64(i)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+3*day)); err != nil {
		t.Fatal(err)
	}
	// A recent reading: the clock is not far ahead of the newest one.
	write(t, w, Reading{Device: "live", Metric: "m", TS: base + 10*day - 1e9, Value: 1})
	// A cap the directory is already over, set once the data is in.
	size := dirBytes(t, s.Dir())
	if err := w.do(ctx, func() error { w.policy.MaxDiskBytes = size / 2; return nil }); err != nil {
		t.Fatal(err)
	}
	r := NewRetention(s, w, RetentionOptions{DiskCheck: 20 * time.Millisecond, Logger: log})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // readings keep coming: the prune rests after each step
		defer close(done)
		for ts := base + 10*day; ; ts += 1e9 {
			select {
			case <-stop:
				return
			default:
			}
			write(t, w, Reading{Device: "live", Metric: "m", TS: ts, Value: 1})
		}
	}()
	err := r.PruneAge(ctx, time.Unix(0, base+10*day+day/2))
	close(stop)
	// The directory may still be over the cap's stop mark, which no
	// retention run brings down now: ingest then waits for room for ever.
	// Lift the cap, so that the last write goes through.
	if err := w.do(ctx, func() error { w.policy.MaxDiskBytes, w.pauses[PauseDiskCap] = 0, ""; return nil }); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "data directory above the disk cap's high mark") {
		t.Errorf("the disk cap was not checked while the prune ran; log:\n%s", logs.String())
	}
	// The disk cap may have taken a day of live readings too: it cannot
	// get under a cap of half the memtables.
	oldest, _, ok, err := s.ReadingSpan()
	if err != nil {
		t.Fatal(err)
	}
	if cut := base + 10*day + day/2 - day; ok && oldest < cut {
		t.Errorf("oldest reading left %s, before the cut at %s", time.Unix(0, oldest).UTC(), time.Unix(0, cut).UTC())
	}
	if got := w.Stats().PrunedReadings; got < uint64(len(rs)) {
		t.Errorf("pruned %d readings, by age and by the disk cap; want the %d old ones at least", got, len(rs))
	}
}
