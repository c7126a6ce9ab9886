package buffer

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// Retention benchmarks; scripts/bench.sh retention runs them with the
// issue's sizes (CAIRN_BENCH_RETENTION_SERIES, CAIRN_BENCH_RETENTION_DAYS;
// 1,000 series and 30 days there, small by default).

// loadDays writes series × days of 1 Hz readings (realistic temperatures)
// straight into sealed buckets of 200, from start on, and indexes them.
func loadDays(b *testing.B, s *Store, series, days int, start int64) {
	samples := make([]Sample, 86400)
	for sr := range series {
		sn := newSensor(uint64(sr), 21, 3, 0.05, 2)
		for d := range days {
			for i := range samples {
				ts := start + int64(d)*encoding.NanosPerDay + int64(i)*1e9
				samples[i] = Sample{TS: ts, Value: sn.at(ts)}
			}
			loadBuckets(b, s, "dev"+strconv.Itoa(sr/2), []string{"temperature", "humidity"}[sr%2], samples, 200)
		}
	}
	if err := s.load(); err != nil {
		b.Fatal(err)
	}
}

// runWriter runs a Writer of s until the benchmark ends.
func runWriter(b *testing.B, s *Store, opts WriterOptions) *Writer {
	w := NewWriter(s, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return w
}

// loadedStore opens a store in a new directory holding series × days of
// readings from start on (loadDays), with a running Writer that keeps raw
// readings 7 days.
func loadedStore(b *testing.B, series, days int, start int64) (*Store, *Writer) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	loadDays(b, s, series, days, start)
	return s, runWriter(b, s, WriterOptions{SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 7 * 24 * time.Hour}})
}

// BenchmarkRetention_Prune stores days of series at 1 Hz, then applies a
// raw max age of 7 days: the time to prune, the time to compact, and the
// data directory before (compacted) and after.
func BenchmarkRetention_Prune(b *testing.B) {
	series := envInt("CAIRN_BENCH_RETENTION_SERIES", 20)
	days := envInt("CAIRN_BENCH_RETENTION_DAYS", 10)
	start := int64(1763769600) * 1e9
	for b.Loop() {
		b.StopTimer()
		s, w := loadedStore(b, series, days, start)
		r := NewRetention(s, w, RetentionOptions{})
		if err := r.compact(context.Background(), 0); err != nil {
			b.Fatal(err)
		}
		before := dirBytes(b, s.Dir())
		b.StartTimer()
		t0 := time.Now()
		if err := w.Prune(context.Background(), time.Unix(0, start+int64(days)*encoding.NanosPerDay)); err != nil {
			b.Fatal(err)
		}
		prune := time.Since(t0)
		if err := r.compact(context.Background(), 0); err != nil {
			b.Fatal(err)
		}
		compact := time.Since(t0) - prune
		after := dirBytes(b, s.Dir())
		b.ReportMetric(prune.Seconds(), "prune-s")
		b.ReportMetric(compact.Seconds(), "compact-s")
		b.ReportMetric(float64(before), "bytes-before")
		b.ReportMetric(float64(after), "bytes-after")
		b.ReportMetric(float64(after)/float64(before), "after/before")
		b.ReportMetric(float64(w.Stats().PrunedReadings), "readings-pruned")
	}
}

// BenchmarkRetention_IngestWhilePruning ingests readings through the
// Writer (commits of 1,000, 200 series) into a store holding days of old
// data, alone and while a prune of all but the last 7 days runs (and the
// compaction after it): readings/s of each, and, with the prune, over the
// time the prune and compaction took (readings/s-during-prune).
func BenchmarkRetention_IngestWhilePruning(b *testing.B) {
	series := envInt("CAIRN_BENCH_RETENTION_SERIES", 20)
	days := envInt("CAIRN_BENCH_RETENTION_DAYS", 10)
	n := envInt("CAIRN_BENCH_RETENTION_INGEST", 200000)
	start := int64(1763769600) * 1e9
	now := start + int64(days)*encoding.NanosPerDay
	for _, pruning := range []bool{false, true} {
		name := "alone"
		if pruning {
			name = "pruning"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s, w := loadedStore(b, series, days, start)
				pruned := make(chan time.Duration, 1)
				b.StartTimer()
				t0 := time.Now()
				if pruning {
					go func() {
						if err := w.Prune(context.Background(), time.Unix(0, now+encoding.NanosPerDay/2)); err != nil {
							b.Error(err)
						}
						if err := NewRetention(s, w, RetentionOptions{}).compact(context.Background(), 0); err != nil {
							b.Error(err)
						}
						pruned <- time.Since(t0)
					}()
				}
				ch := make(chan Result, 1)
				during := -1.0 // readings/s while the prune and compaction ran
				var prune time.Duration
				for i := 0; i < n; i += 1000 {
					if pruning && during < 0 {
						select {
						case prune = <-pruned:
							during = float64(i) / prune.Seconds()
						default:
						}
					}
					rs := make([]Reading, 1000)
					for j := range rs {
						k := i + j
						// A millisecond apart: even 100 M readings stay
						// within the minutes after now, before the clock
						// that the prune goes by.
						rs[j] = Reading{Device: "live" + strconv.Itoa(k%200), Metric: "t", TS: now + int64(k/200)*1e6, Value: float64(k % 977)}
					}
					if err := w.Submit(context.Background(), rs, func(r Result) { ch <- r }); err != nil {
						b.Fatal(err)
					}
					if r := <-ch; r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				elapsed := time.Since(t0)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "readings/s")
				if pruning {
					if during < 0 { // the ingest ended first
						prune = <-pruned
						during = float64(n) / elapsed.Seconds()
					}
					b.ReportMetric(prune.Seconds(), "prune-s")
					b.ReportMetric(during, "readings/s-during-prune")
				}
			}
		})
	}
}

// BenchmarkRetention_DiskCapOvershoot fills a store with the default
// memtable to several times a disk cap (CAIRN_BENCH_DISK_CAP_MIB, 256 by
// default) with the upstream down, as TestRetention_DiskCapDropsOldestUnsent
// does at 16 MiB, and reports how far the data directory went over the cap
// at its peak (peak/cap, measured at every commit of 2,000 readings) and
// where it ended (end/cap).
func BenchmarkRetention_DiskCapOvershoot(b *testing.B) {
	limit := int64(envInt("CAIRN_BENCH_DISK_CAP_MIB", 256)) << 20
	for b.Loop() {
		s, err := Open(Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		upstream(b, s) // down: nothing leaves the log but what the cap drops
		w := runWriter(b, s, WriterOptions{MaxReadings: 2000, SealCheck: time.Hour, Retention: RetentionPolicy{MaxDiskBytes: limit}})
		r := NewRetention(s, w, RetentionOptions{DiskCheck: 100 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		rng := rand.New(rand.NewPCG(7, 7))
		ts := int64(1763769600) * 1e9
		var peak int64
		results := make(chan Result, 1)
		for drops := 0; drops < 5; {
			before := s.DroppedUnsent()
			rs := make([]Reading, 0, 2000)
			for i := range 2000 {
				rs = append(rs, Reading{Device: "bridge-" + strconv.Itoa(i%1000), Metric: "t", TS: ts, Value: rng.Float64()})
				if i%1000 == 999 {
					ts += 1e9
				}
			}
			if err := w.Submit(context.Background(), rs, func(r Result) { results <- r }); err != nil {
				b.Fatal(err)
			}
			if res := <-results; res.Err != nil {
				b.Fatal(res.Err)
			}
			st, err := s.Stats()
			if err != nil {
				b.Fatal(err)
			}
			peak = max(peak, st.DiskBytes)
			if s.DroppedUnsent() > before {
				drops++
			}
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		st, err := s.Stats()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(peak)/float64(limit), "peak/cap")
		b.ReportMetric(float64(st.DiskBytes)/float64(limit), "end/cap")
		b.ReportMetric(float64(limit>>20), "cap-MiB")
	}
}

// BenchmarkLoadSealedDays stores series × days of readings at 1 Hz that
// end at the last UTC midnight (loadDays: sealed buckets written straight
// to the store, not through the Writer) and compacts the store:
// readings/s. With CAIRN_BENCH_STORE_DIR set, the store is made in that
// directory, which must not exist yet, and kept there: scripts/bench.sh
// runs a cairn on it to measure ingest while a prune runs
// (embedded_pruning); run it with -benchtime 1x then.
func BenchmarkLoadSealedDays(b *testing.B) {
	series := envInt("CAIRN_BENCH_RETENTION_SERIES", 20)
	days := envInt("CAIRN_BENCH_RETENTION_DAYS", 10)
	keep := os.Getenv("CAIRN_BENCH_STORE_DIR")
	end := time.Now().UTC().Truncate(24 * time.Hour)
	start := end.AddDate(0, 0, -days).UnixNano()
	for b.Loop() {
		dir := keep
		if dir == "" {
			dir = b.TempDir()
		} else if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			b.Fatalf("CAIRN_BENCH_STORE_DIR %s exists already (or cannot be checked: %v)", dir, err)
		}
		s, err := Open(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		loadDays(b, s, series, days, start)
		if err := s.compact(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(series*days*86400)/time.Since(t0).Seconds(), "readings/s")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
