package buffer

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkSeriesMemory measures the memory each series costs: the heap
// live after writing one reading to each of N new series (100 metrics
// per device) through a real Store and Writer and checkpointing, less the
// heap live before, over N (bytes/series); and the same for the store
// opened again on that directory, which loads the series from disk
// (reopened-bytes/series). The -units cases give every series a unit,
// one of a few. scripts/bench.sh series prints them; the figures are in
// docs/storage.md, and size store.max_series.
func BenchmarkSeriesMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, withUnits := range []bool{false, true} {
			name := fmt.Sprintf("%dk", n/1000)
			if withUnits {
				name += "-units"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					live, reopened := seriesMemory(b, n, withUnits)
					b.ReportMetric(live, "bytes/series")
					b.ReportMetric(reopened, "reopened-bytes/series")
				}
			})
		}
	}
}

// seriesMemory returns the heap bytes per series of n new series, with
// the Writer that made them, and after the store is opened again; with
// withUnits, each series has a unit.
func seriesMemory(b *testing.B, n int, withUnits bool) (live, reopened float64) {
	b.Helper()
	dir := b.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWriter(s, WriterOptions{})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	ts := time.Now().Add(-time.Minute).UnixNano()
	units := []string{"°C", "%", "hPa", "kWh"}
	submit := func(from, to int) {
		var rs []Reading
		wait := make(chan Result, 1)
		for i := from; i < to; i++ {
			r := Reading{Device: fmt.Sprintf("device-%05d", i/100), Metric: fmt.Sprintf("metric-%03d", i%100), TS: ts, Value: float64(i)}
			if withUnits {
				r.Unit = units[i%len(units)]
			}
			rs = append(rs, r)
			if len(rs) == 5000 || i == to-1 {
				if err := w.Submit(ctx, rs, func(r Result) { wait <- r }); err != nil {
					b.Fatal(err)
				}
				if r := <-wait; r.Err != nil || r.Stored != len(rs) {
					b.Fatalf("write: %+v", r)
				}
				rs = nil
			}
		}
		if err := w.Checkpoint(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// A few series first, so that what the Writer and Badger allocate
	// once, whatever the number of series, is in the baseline.
	const warm = 1000
	submit(0, warm)
	before := liveHeap()
	submit(warm, warm+n)
	after := liveHeap()
	live = float64(after-before) / float64(n)

	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	// Opened again: the same store empty of series is the baseline.
	empty, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	base := liveHeap()
	if err := empty.Close(); err != nil {
		b.Fatal(err)
	}
	s, err = Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	loaded := liveHeap()
	if got := s.SeriesCount(); got != warm+n {
		b.Fatalf("reopened: %d series, want %d", got, warm+n)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	reopened = (float64(loaded) - float64(base)) / float64(warm+n)
	return live, reopened
}

// liveHeap returns the heap bytes in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
