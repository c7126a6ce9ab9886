package buffer

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkWriter_Commit times the group commit of number readings: each
// op is a commit of 2,000 readings, 10 of each of 200 series, through the
// Writer into a real store (synced), its checkpoints included. It reports
// readings/s and ns a reading. beside-texts has text series in the store
// too.
func BenchmarkWriter_Commit(b *testing.B) {
	b.Run("numbers", func(b *testing.B) { writerCommit(b, nil) })
	b.Run("beside-texts", func(b *testing.B) { writerCommit(b, benchTextSeries) })
}

// writerCommit is BenchmarkWriter_Commit, after before (if not nil) has
// written to the store.
func writerCommit(b *testing.B, before func(*testing.B, *Writer)) {
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
	if before != nil {
		before(b, w)
	}
	const series, step = 200, 10
	sensors := make([]*sensor, series)
	for i := range sensors {
		sensors[i] = newSensor(uint64(i), 21, 3, 0.05, 2)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	start := int64(1763769600) * 1e9
	results := make(chan Result, 1)
	batch := make([]Reading, 0, series*step)
	sec, total := 0, 0
	b.ResetTimer()
	for b.Loop() {
		batch = batch[:0]
		for i, sn := range sensors {
			dev := "dev" + strconv.Itoa(i/2)
			metric := [2]string{"temperature", "humidity"}[i%2]
			for k := range step {
				ts := jitteredSecond(rng, start, sec+k)
				batch = append(batch, Reading{Device: dev, Metric: metric, TS: ts, Value: sn.at(ts)})
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
