package dashboard

import (
	"bytes"
	"io"
	"math"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// maxPageBytes is the most the page may weigh.
const maxPageBytes = 200 << 10

// chart90d is one metric over 90 days of records of lvl.
func chart90d(lvl aggregate.Level) Chart {
	from, to := Range90d.Window(end)
	return Chart{
		Title: "sensor-000: temperature", Unit: "°C", From: from, To: to, Level: lvl,
		Buckets: series(from, to, lvl, func(i int, t time.Time) (float64, float64, bool) {
			return 15 + 8*math.Sin(float64(t.Unix())/86400*2*math.Pi) + float64(i%7)/10, 0.6, true
		}),
	}
}

// BenchmarkChart90d draws one metric over 90 days from 129,600 minute
// records, merged into MaxColumns columns at most (the worst a caller
// can give; Range90d.Level reads 2,160 hour records instead, see
// BenchmarkChart90dHours).
func BenchmarkChart90d(b *testing.B) {
	benchChart(b, chart90d(aggregate.Minute))
}

// BenchmarkChart90dHours draws one metric over 90 days from the 2,160
// hour records that Range90d.Level asks for.
func BenchmarkChart90dHours(b *testing.B) {
	benchChart(b, chart90d(aggregate.Hour))
}

func benchChart(b *testing.B, c Chart) {
	var buf bytes.Buffer
	if err := WriteChart(&buf, c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuNanos()
	for b.Loop() {
		if err := WriteChart(io.Discard, c); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(buf.Len()), "svg_bytes")
}

// BenchmarkPage100Devices writes the page of 100 devices with 5 metrics
// each, their latest values, and the first device's 5 charts over 24
// hours (1,440 minute records each), as GET / does.
func BenchmarkPage100Devices(b *testing.B) {
	p := testPage(100, 5, Range24h, true)
	var buf bytes.Buffer
	if err := WritePage(&buf, p); err != nil {
		b.Fatal(err)
	}
	if buf.Len() > maxPageBytes {
		b.Fatalf("page of %d bytes, more than %d", buf.Len(), maxPageBytes)
	}
	b.ReportAllocs()
	cpu := cpuNanos()
	for b.Loop() {
		if err := WritePage(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(buf.Len()), "page_bytes")
}

// reportCPU reports the CPU time the process used per operation since
// cpu: on a machine shared with other work, ns/op counts the time
// spent waiting for a core too, and cpu-ns/op does not. Run with -cpu 1
// for the time on one core (the garbage collector's work included).
func reportCPU(b *testing.B, cpu int64) {
	if cpu == 0 {
		return
	}
	b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N), "cpu-ns/op")
}

// TestPageWeight checks the weight of the page of 100 devices with 5
// metrics each and the first one's charts, over every range.
func TestPageWeight(t *testing.T) {
	for _, r := range Ranges() {
		var buf bytes.Buffer
		if err := WritePage(&buf, testPage(100, 5, r, true)); err != nil {
			t.Fatal(err)
		}
		if buf.Len() > maxPageBytes {
			t.Errorf("%v: page of %d bytes, more than %d", r, buf.Len(), maxPageBytes)
		}
		t.Logf("%v: %d bytes", r, buf.Len())
	}
}

// textsOver returns n readings evenly over the 24 hours before end,
// cycling through states texts.
func textsOver(n, states int) []Text {
	from, to := Range24h.Window(end)
	step := to.Sub(from) / time.Duration(n)
	ts := make([]Text, n)
	for i := range ts {
		ts[i] = Text{from.Add(time.Duration(i) * step), "state " + string(rune('a'+i*7%states))}
	}
	return ts
}

// BenchmarkTimeline24h draws a series of 5 states over 24 hours from
// MaxTexts readings, the most the page reads: more stretches than
// columns, merged into MaxColumns.
func BenchmarkTimeline24h(b *testing.B) {
	from, to := Range24h.Window(end)
	benchChart(b, Chart{Title: "mill: status", From: from, To: to, Level: aggregate.Minute, Texts: textsOver(MaxTexts, 5)})
}

// BenchmarkTimeline24hFew draws a state that changes every 10 minutes
// over 24 hours (144 readings, 3 states): a band per stretch.
func BenchmarkTimeline24hFew(b *testing.B) {
	from, to := Range24h.Window(end)
	benchChart(b, Chart{Title: "hall: mode", From: from, To: to, Level: aggregate.Minute, Texts: textsOver(144, 3)})
}

// BenchmarkEvents24h draws MaxTexts events of 20 texts over 24 hours.
func BenchmarkEvents24h(b *testing.B) {
	from, to := Range24h.Window(end)
	benchChart(b, Chart{Title: "desk: action", From: from, To: to, Level: aggregate.Minute, Texts: textsOver(MaxTexts, 20), Events: true})
}
