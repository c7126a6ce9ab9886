//go:build unix

package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/httpapi"
)

// The dashboard's benchmarks (scripts/bench.sh dashboard): the server's
// time to answer GET / and one device's 90-day charts, through the real
// handler over a real store of dashDevices devices × dashMetrics metrics,
// every series with one reading a minute (a few seconds past it) up to
// dashEnd, so one minute record per reading, their hour and day records
// rolled up and the readings themselves sealed in buckets, as ingest
// leaves them:
//
//   - the charted device, d000, for CAIRN_BENCH_DASHBOARD_DAYS (90) days:
//     its 5 series hold 648,000 readings;
//   - the other 99 devices for CAIRN_BENCH_DASHBOARD_OTHER_DAYS (7) days:
//     4.99 M readings, of which the page shows the latest. All 100
//     devices × 90 days (64.8 M readings) is the store the dashboard's
//     targets speak of, but the Writer takes readings that come one a
//     minute (each its own minute record) at about 20 k/s on one shared
//     core: 5.64 M took 281 s, 64.8 M would take about 54 minutes. Set
//     CAIRN_BENCH_DASHBOARD_OTHER_DAYS=90 to make it.
//
// Making the store takes minutes, so it is made once in
// CAIRN_BENCH_DASHBOARD_DIR and kept: a directory with a complete store
// (dashMarker, written last, says what it holds) is used as it is; one
// with another such store, or with a store left half made (dashPartial,
// written first), is emptied and the store made again; any other
// directory that is not empty fails the benchmark rather than lose what
// it holds. Without CAIRN_BENCH_DASHBOARD_DIR the benchmarks are
// skipped.

const (
	dashDevices = 100
	dashMetrics = 5
	// dashMarker is the file written into the data directory once the
	// store is complete.
	dashMarker = "cairn-bench-dashboard.json"
	// dashPartial is the file written into the data directory before the
	// store is made.
	dashPartial = "cairn-bench-dashboard.partial"
)

// dashEnd is the minute after the last reading, and the gateway's clock
// while the benchmarks run: a fixed time, so that a kept store is always
// the last days before "now".
var dashEnd = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// dashMetricDefs are the metrics of every device: name, unit, and the
// shape of its values (base, daily amplitude, noise, decimals).
var dashMetricDefs = [dashMetrics]struct {
	name, unit       string
	base, amp, noise float64
	decimals         int
}{
	{"temperature", "°C", 21, 3, 0.05, 2},
	{"humidity", "%", 50, 8, 0.2, 1},
	{"pressure", "hPa", 1013, 2, 0.1, 1},
	{"co2", "ppm", 600, 150, 5, 0},
	{"battery", "V", 3.6, 0.02, 0.005, 3},
}

// dashInfo is what the marker file says of the store.
type dashInfo struct {
	Devices     int     `json:"devices"`
	Metrics     int     `json:"metrics"`
	Days        int     `json:"days"`       // of d000
	OtherDays   int     `json:"other_days"` // of the other devices
	End         int64   `json:"end"`        // dashEnd, Unix seconds
	Readings    int64   `json:"readings"`
	GenerateSec float64 `json:"generate_seconds"`
	Bytes       int64   `json:"bytes"` // the data directory, after the store is closed
}

func dashDevice(i int) string { return fmt.Sprintf("d%03d", i) }

// shape says what a store holds, in words.
func (info dashInfo) shape() string {
	if info.Devices == 1 {
		return fmt.Sprintf("%s x %d metrics x %d days, one reading an hour", dashWideDevice, info.Metrics, info.Days)
	}
	return fmt.Sprintf("d000 x %d metrics x %d days, %d devices x %d metrics x %d days, one a minute",
		info.Metrics, info.Days, info.Devices-1, info.Metrics, info.OtherDays)
}

// dashDays returns the number of days in the environment variable name,
// or def.
func dashDays(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s: want a positive number of days, got %q", name, v)
	}
	return n
}

// dashStore returns the directory of the benchmarks' store, making it if
// it is not there, and what it holds.
func dashStore(b *testing.B) (string, dashInfo) {
	b.Helper()
	want := dashInfo{
		Devices: dashDevices, Metrics: dashMetrics, End: dashEnd.Unix(),
		Days:      dashDays(b, "CAIRN_BENCH_DASHBOARD_DAYS", 90),
		OtherDays: dashDays(b, "CAIRN_BENCH_DASHBOARD_OTHER_DAYS", 7),
	}
	return keptStore(b, "CAIRN_BENCH_DASHBOARD_DIR", want, dashGenerate)
}

// keptStore returns the directory named by the environment variable env
// with the store want describes, making it with generate if the
// directory holds no such store, and what it holds.
func keptStore(b *testing.B, env string, want dashInfo, generate func(*testing.B, string, dashInfo) dashInfo) (string, dashInfo) {
	b.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		b.Skip(env + " is not set (scripts/bench.sh dashboard sets it)")
	}
	if raw, err := os.ReadFile(filepath.Join(dir, dashMarker)); err == nil {
		var got dashInfo
		if err := json.Unmarshal(raw, &got); err != nil {
			b.Fatalf("%s: %v", dashMarker, err)
		}
		if got.Devices == want.Devices && got.Metrics == want.Metrics && got.Days == want.Days &&
			got.OtherDays == want.OtherDays && got.End == want.End {
			return dir, got
		}
		b.Logf("dashboard store: %s holds another store (%s); making it again", dir, raw)
	} else if !errors.Is(err, fs.ErrNotExist) {
		b.Fatal(err)
	} else if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(dir, dashPartial)); err != nil {
			b.Fatalf("%s is not empty and holds no store of these benchmarks (no %s or %s): name an empty or missing directory", dir, dashMarker, dashPartial)
		}
		b.Logf("dashboard store: %s holds a store left half made; making it again", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, dashPartial), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	info := generate(b, dir, want)
	raw, err := json.Marshal(info)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, dashMarker), append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, dashPartial)); err != nil {
		b.Fatal(err)
	}
	b.Logf("dashboard store: generated %d readings (%s) in %.1f s, %d bytes on disk", info.Readings, info.shape(), info.GenerateSec, info.Bytes)
	return dir, info
}

// dashSeries makes the values of one series: a daily wave, a random walk
// and noise, rounded.
type dashSeries struct {
	device, metric, unit string
	rng                  *rand.Rand
	base, amp, noise     float64
	walk, decimals       float64
	from                 int64 // its first minute
}

func (sr *dashSeries) at(ts int64) float64 {
	sr.walk += sr.rng.NormFloat64() * sr.noise / 10
	phase := float64(ts%int64(24*time.Hour)) / float64(24*time.Hour) * 2 * math.Pi
	v := sr.base + sr.walk + sr.amp*math.Sin(phase) + sr.rng.NormFloat64()*sr.noise
	return math.Round(v*sr.decimals) / sr.decimals
}

// dashGenerate makes the store in dir: 90 days (info.Days) of d000 and
// info.OtherDays of the other devices, one reading a minute (dashFill).
func dashGenerate(b *testing.B, dir string, info dashInfo) dashInfo {
	first := dashEnd.Add(-time.Duration(max(info.Days, info.OtherDays)) * 24 * time.Hour)
	var all []*dashSeries
	var want int64
	for d := range dashDevices {
		days := info.OtherDays
		if d == 0 {
			days = info.Days
		}
		for m, def := range dashMetricDefs {
			seed := uint64(d*dashMetrics + m)
			all = append(all, &dashSeries{
				device: dashDevice(d), metric: def.name, unit: def.unit,
				rng:  rand.New(rand.NewPCG(seed, seed+1)),
				base: def.base + float64(d%10)/10*def.amp, amp: def.amp, noise: def.noise,
				decimals: math.Pow10(def.decimals),
				from:     dashEnd.Add(-time.Duration(days) * 24 * time.Hour).UnixNano(),
			})
			want += int64(days) * 24 * 60
		}
	}
	return dashFill(b, dir, info, all, first, time.Minute, want)
}

// dashFill makes the store in dir from series all, one reading of each
// every step from first (or its from) to dashEnd, in batches of 10,000
// readings with several batches in flight; then seals and rolls up
// everything, as the Writer would over time, and checks that want
// readings were stored. The store is opened without a sync per commit:
// it is of no use unless complete, which the marker says.
func dashFill(b *testing.B, dir string, info dashInfo, all []*dashSeries, first time.Time, step time.Duration, want int64) dashInfo {
	const (
		batch    = 10000 // readings in one Submit
		inFlight = 8     // batches submitted and not yet committed
	)
	began := time.Now()
	s, err := buffer.Open(buffer.Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	w := buffer.NewWriter(s, buffer.WriterOptions{MaxReadings: 2 * batch})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stop := func() error {
		cancel()
		return errors.Join(<-done, s.Close())
	}

	results := make(chan buffer.Result, inFlight)
	pending := 0
	wait := func() {
		r := <-results
		pending--
		if r.Err != nil || r.Refused > 0 {
			b.Fatalf("dashboard store: commit: %+v", r)
		}
		info.Readings += int64(r.Stored)
	}
	submit := func(rs []buffer.Reading) {
		if pending == inFlight {
			wait()
		}
		if err := w.Submit(ctx, rs, func(r buffer.Result) { results <- r }); err != nil {
			b.Fatal(err)
		}
		pending++
	}
	rs := make([]buffer.Reading, 0, batch+len(all))
	for t := first; t.Before(dashEnd); t = t.Add(step) {
		at := t.UnixNano()
		for _, sr := range all {
			if at < sr.from {
				continue
			}
			ts := at + int64(sr.rng.IntN(5000))*int64(time.Millisecond)
			rs = append(rs, buffer.Reading{Device: sr.device, Metric: sr.metric, TS: ts, Value: sr.at(ts), Unit: sr.unit})
		}
		if len(rs) >= batch {
			submit(rs)
			rs = make([]buffer.Reading, 0, batch+len(all))
		}
		if t.Sub(first)%(10*24*time.Hour) == 0 {
			fmt.Fprintf(os.Stderr, "dashboard store: %s, %d readings stored in %.0f s\n", t.Format(time.DateOnly), info.Readings, time.Since(began).Seconds())
		}
	}
	if len(rs) > 0 {
		submit(rs)
	}
	for pending > 0 {
		wait()
	}
	// Seal every open point and roll up every hour and day, as time
	// would once the last hour is over.
	if err := w.SealDue(ctx, dashEnd.Add(24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	if err := w.RollUp(ctx, dashEnd.Add(time.Hour)); err != nil {
		b.Fatal(err)
	}
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	info.GenerateSec = time.Since(began).Seconds()
	info.Bytes = dashDirBytes(b, dir)
	if info.Readings != want {
		b.Fatalf("dashboard store: %d readings stored, want %d", info.Readings, want)
	}
	return info
}

// dashDirBytes returns the size of the files under dir.
func dashDirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// dashAPI opens the store in dir with its Writer running, and the HTTP
// API over it with the gateway's clock at dashEnd, until the benchmark
// ends.
func dashAPI(b *testing.B, dir string) *httpapi.API {
	b.Helper()
	s, err := buffer.Open(buffer.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	w := buffer.NewWriter(s, buffer.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := errors.Join(<-done, s.Close()); err != nil {
			b.Error(err)
		}
	})
	clock, err := buffer.NewClock(s, buffer.ClockOptions{Now: func() time.Time { return dashEnd }, Always: true})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	api, err := httpapi.New(httpapi.Options{
		Store:    s,
		Writer:   w,
		Ingest:   gateway.NewIngester(w, gateway.IngesterOptions{Logger: log}),
		MQTT:     func() httpapi.MQTTStatus { return httpapi.MQTTStatus{Mode: "embedded", Connected: true} },
		Clock:    clock,
		Started:  dashEnd.Add(-time.Hour),
		Registry: httpapi.NewRegistry(),
		Logger:   log,
	})
	if err != nil {
		b.Fatal(err)
	}
	return api
}

// dashGet answers target through the API's handler, and fails the
// benchmark unless the answer is a 200.
func dashGet(b *testing.B, api *httpapi.API, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s: %d %.300s", target, rec.Code, rec.Body)
	}
	return rec
}

// BenchmarkDashboardPage answers GET / as a browser first asks for it:
// the gateway's health, the 100 devices with the latest value of each
// metric, and d000's five 24-hour charts (1,440 minute records each).
// page_bytes is the page's weight.
func BenchmarkDashboardPage(b *testing.B) {
	benchPage(b, "/?device=d000&range=24h", "page_bytes", func(body string) error {
		if n := strings.Count(body, `<svg`); n < dashMetrics {
			return fmt.Errorf("%d charts, want %d", n, dashMetrics)
		}
		if !strings.Contains(body, dashDevice(dashDevices-1)) {
			return fmt.Errorf("no device %s", dashDevice(dashDevices-1))
		}
		return nil
	})
}

// BenchmarkDashboardChart90d answers the charts part of d000 over 90
// days, as the page's 90 d button fetches it: five charts (the API draws
// a device's metrics together), each from the 2,160 hour records of its
// metric. charts_bytes is the part's weight.
func BenchmarkDashboardChart90d(b *testing.B) {
	benchPage(b, "/?part=charts&device=d000&range=90d", "charts_bytes", func(body string) error {
		if n := strings.Count(body, `<svg`); n != dashMetrics {
			return fmt.Errorf("%d charts, want %d", n, dashMetrics)
		}
		return nil
	})
}

// benchPage answers GET target through the API over the benchmarks'
// store, and reports the answer's size as unit. check looks at the first
// answer: a chart with no data in it fails the benchmark, since the
// store was made to fill every chart.
func benchPage(b *testing.B, target, unit string, check func(body string) error) {
	dir, _ := dashStore(b)
	benchPageOf(b, dir, target, unit, check)
}

// benchPageOf is benchPage over the store in dir.
func benchPageOf(b *testing.B, dir, target, unit string, check func(body string) error) {
	api := dashAPI(b, dir)
	body := dashGet(b, api, target).Body.String()
	if strings.Contains(body, `class="none"`) {
		b.Fatalf("GET %s: a chart without data", target)
	}
	if err := check(body); err != nil {
		b.Fatalf("GET %s: %v", target, err)
	}
	b.ReportAllocs()
	cpu := cpuNanos(b)
	for b.Loop() {
		dashGet(b, api, target)
	}
	b.ReportMetric(float64(cpuNanos(b)-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(len(body)), unit)
}

// cpuNanos returns the CPU time the process has used, user and system:
// on a loaded machine the wall time per request includes the time spent
// waiting for the core, the CPU time does not (but it includes the
// store's own goroutines meanwhile).
func cpuNanos(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
