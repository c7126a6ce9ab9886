package buffer

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// BenchmarkWriter_CommitTexts is BenchmarkWriter_Commit for text
// readings: each op is a commit of 2,000 readings, 10 of each of 200
// state series (a mode that changes about every 30 readings, 1 s apart),
// through the Writer into a real store (synced), its checkpoints, which
// write the States records, included.
func BenchmarkWriter_CommitTexts(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		s.Close()
	}()
	const series, step = 200, 10
	modes := []string{"heat", "cool", "off", "auto", "eco"}
	cur := make([]int, series)
	rng := rand.New(rand.NewPCG(3, 3))
	start := int64(1763769600) * 1e9
	results := make(chan Result, 1)
	batch := make([]Reading, 0, series*step)
	sec, total := 0, 0
	b.ResetTimer()
	for b.Loop() {
		batch = batch[:0]
		for i := range series {
			for k := range step {
				if rng.IntN(30) == 0 {
					cur[i] = rng.IntN(len(modes))
				}
				ts := jitteredSecond(rng, start, sec+k)
				batch = append(batch, textOf("th"+strconv.Itoa(i), "mode", ts, modes[cur[i]]))
			}
		}
		sec += step
		if err := w.Submit(ctx, slices.Clone(batch), func(r Result) { results <- r }); err != nil {
			b.Fatal(err)
		}
		if r := <-results; r.Err != nil || r.Stored != len(batch) {
			b.Fatalf("%+v", r)
		}
		total += len(batch)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "readings/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/reading")
}

// BenchmarkStates_Query times the time in state of a day of a thermostat
// (a reading every 10 s, a mode that changes about every 3 minutes),
// checkpointed and rolled up: by minute (1,440 groups), by hour, and over
// the whole day with partial minutes at both ends.
func BenchmarkStates_Query(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		s.Close()
	}()
	start := int64(1763769600) * 1e9
	modes := []string{"heat", "cool", "off"}
	rng := rand.New(rand.NewPCG(5, 5))
	var rs []Reading
	mode := 0
	for i := range 8640 {
		if rng.IntN(18) == 0 {
			mode = rng.IntN(len(modes))
		}
		rs = append(rs, textOf("th", "mode", start+int64(i)*10e9, modes[mode]))
	}
	res := make(chan Result, 1)
	for len(rs) > 0 {
		n := min(len(rs), 1000)
		if err := w.Submit(ctx, rs[:n], func(r Result) { res <- r }); err != nil {
			b.Fatal(err)
		}
		if r := <-res; r.Err != nil || r.Stored != n {
			b.Fatalf("%+v", r)
		}
		rs = rs[n:]
	}
	if err := w.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	if err := w.RollUp(ctx, time.Unix(0, start+2*int64(24*time.Hour))); err != nil {
		b.Fatal(err)
	}
	end := start + int64(24*time.Hour)
	now := end + int64(time.Hour)
	for _, tt := range []struct {
		name  string
		level aggregate.Level
	}{{"minute", aggregate.Minute}, {"hour", aggregate.Hour}} {
		b.Run(tt.name, func(b *testing.B) {
			var reads Reads
			for b.Loop() {
				var err error
				if _, reads, err = s.StatesByLevel("th", "mode", tt.level, start, end, now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(reads.Records), "records/op")
		})
	}
	b.Run("all", func(b *testing.B) {
		var reads Reads
		for b.Loop() {
			var err error
			if _, reads, err = s.StatesCover("th", "mode", start+5e9, end-5e9, now); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(reads.Records), "records/op")
		b.ReportMetric(float64(reads.Readings), "readings/op")
	})
}
