//go:build unix

package httpapi_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The dashboard's benchmarks of its worst device (scripts/bench.sh
// dashboard): one device, dashWideDevice, with dashWideMetrics metrics
// over CAIRN_BENCH_DASHBOARD_DAYS (90) days, one reading an hour in each
// (a few seconds past it), so that a 90-day chart of any of its metrics
// reads as many hour records as one of d000's: 2.16 M readings in all.
// The store is kept in CAIRN_BENCH_DASHBOARD_WIDE_DIR, as dashStore keeps
// its own; without it the benchmarks are skipped.

const (
	dashWideDevice  = "wide"
	dashWideMetrics = 1000
)

// dashWideStore returns the directory of the wide device's store, making
// it if it is not there, and what it holds.
func dashWideStore(b *testing.B) (string, dashInfo) {
	b.Helper()
	want := dashInfo{Devices: 1, Metrics: dashWideMetrics, End: dashEnd.Unix(), Days: dashDays(b, "CAIRN_BENCH_DASHBOARD_DAYS", 90)}
	return keptStore(b, "CAIRN_BENCH_DASHBOARD_WIDE_DIR", want, dashWideGenerate)
}

func dashWideMetric(i int) string { return fmt.Sprintf("m%04d", i) }

// dashWideGenerate makes the wide device's store in dir, one reading of
// each metric an hour (dashFill).
func dashWideGenerate(b *testing.B, dir string, info dashInfo) dashInfo {
	all := make([]*dashSeries, info.Metrics)
	for m := range all {
		def := dashMetricDefs[m%dashMetrics]
		seed := uint64(1_000_000 + m)
		all[m] = &dashSeries{
			device: dashWideDevice, metric: dashWideMetric(m), unit: def.unit,
			rng:  rand.New(rand.NewPCG(seed, seed+1)),
			base: def.base, amp: def.amp, noise: def.noise, decimals: math.Pow10(def.decimals),
		}
	}
	first := dashEnd.Add(-time.Duration(info.Days) * 24 * time.Hour)
	return dashFill(b, dir, info, all, first, time.Hour, int64(info.Days)*24*int64(info.Metrics))
}

// BenchmarkDashboardWideChart90d answers the charts part of the wide
// device over 90 days, as the page's 90 d button fetches it. charts is
// the number of charts drawn, charts_bytes the part's weight.
func BenchmarkDashboardWideChart90d(b *testing.B) {
	dir, _ := dashWideStore(b)
	var n int
	benchPageOf(b, dir, "/?part=charts&device="+dashWideDevice+"&range=90d", "charts_bytes", countCharts(&n))
	b.ReportMetric(float64(n), "charts")
}

// BenchmarkDashboardWidePage answers GET / of the wide device at 90
// days: the gateway's health, the device list with the wide device's
// latest values, and its charts.
func BenchmarkDashboardWidePage(b *testing.B) {
	dir, _ := dashWideStore(b)
	var n int
	benchPageOf(b, dir, "/?device="+dashWideDevice+"&range=90d", "page_bytes", countCharts(&n))
	b.ReportMetric(float64(n), "charts")
}

// countCharts checks that an answer has charts, and counts them in n
// (reported after the loop, which deletes the metrics reported before
// it).
func countCharts(n *int) func(body string) error {
	return func(body string) error {
		if *n = strings.Count(body, `<svg`); *n == 0 {
			return errors.New("no chart")
		}
		return nil
	}
}
