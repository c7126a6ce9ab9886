//go:build unix

package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// textStore makes, in a new directory, a store of the device hall with
// five text series over the 24 hours before dashEnd, a reading every
// step in each: three of states (mode0…) and two of events (s3_action,
// s4_action), each cycling through five texts.
func textStore(b *testing.B, step time.Duration) string {
	b.Helper()
	dir := b.TempDir()
	s, err := buffer.Open(buffer.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	w := buffer.NewWriter(s, buffer.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	metrics := []string{"mode0", "mode1", "mode2", "s3_action", "s4_action"}
	var batch []buffer.Reading
	flush := func() {
		res := make(chan buffer.Result, 1)
		if err := w.Submit(ctx, batch, func(r buffer.Result) { res <- r }); err != nil {
			b.Fatal(err)
		}
		if r := <-res; r.Err != nil || r.Stored != len(batch) {
			b.Fatalf("store: %+v", r)
		}
		batch = batch[:0]
	}
	i := 0
	for at := dashEnd.Add(-24 * time.Hour); at.Before(dashEnd); at = at.Add(step) {
		for _, m := range metrics {
			batch = append(batch, buffer.Reading{Device: "hall", Metric: m, TS: at.UnixNano(), Text: fmt.Sprintf("text %d", i%5)})
		}
		if i++; len(batch) >= 5000 {
			flush()
		}
	}
	flush()
	cancel()
	if err := errors.Join(<-done, s.Close()); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkDashboardTextCharts24h answers the charts part of a device
// with five text series over 24 hours, each changing every 3 minutes
// (480 readings a chart).
func BenchmarkDashboardTextCharts24h(b *testing.B) {
	benchTextCharts(b, 3*time.Minute)
}

// BenchmarkDashboardTextCharts24hDense is BenchmarkDashboardTextCharts24h
// with a reading every 4 seconds (21,600 a chart): each chart reads the
// newest 9,700, the most it draws.
func BenchmarkDashboardTextCharts24hDense(b *testing.B) {
	benchTextCharts(b, 4*time.Second)
}

func benchTextCharts(b *testing.B, step time.Duration) {
	benchPageOf(b, textStore(b, step), "/?part=charts&device=hall&range=24h", "charts_bytes", func(body string) error {
		if n := strings.Count(body, `class="chart timeline`); n != 5 {
			return fmt.Errorf("%d timelines, want 5", n)
		}
		return nil
	})
}
