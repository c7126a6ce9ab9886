package dashboard

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// end is the end of every golden chart: a Friday, at noon UTC.
var end = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// series returns Stats records of lvl over [from, to), one per record
// for which f returns ok: count readings from min to max around mean.
func series(from, to time.Time, lvl aggregate.Level, f func(i int, t time.Time) (mean, spread float64, ok bool)) []Bucket {
	var bs []Bucket
	d := lvl.Duration()
	for i, t := 0, from.Truncate(d); t.Before(to); i, t = i+1, t.Add(d) {
		mean, spread, ok := f(i, t)
		if !ok {
			continue
		}
		var s aggregate.Stats
		s.Add(mean - spread)
		s.Add(mean)
		s.Add(mean + spread)
		bs = append(bs, Bucket{Start: t, Stats: s})
	}
	return bs
}

// goldenCharts are the charts whose SVG is kept in testdata/NAME.svg.
func goldenCharts() map[string]Chart {
	from1h, _ := Range1h.Window(end)
	from24h, _ := Range24h.Window(end)
	from7d, _ := Range7d.Window(end)
	from90d, _ := Range90d.Window(end)
	var raw []Point
	for t := from1h; !t.After(end); t = t.Add(30 * time.Second) {
		if m := t.Sub(from1h) / time.Minute; m >= 20 && m < 30 || m == 45 {
			continue
		}
		raw = append(raw, Point{t, 50 + 10*math.Sin(float64(t.Unix())/300)})
	}
	return map[string]Chart{
		// 24 h of minutes between about 17.5 and 24.5: 144 columns of 10
		// minutes, a value axis from 16 to 26 in steps of 2.
		"axis_24h": {
			Title: "kitchen: temperature", Unit: "°C", From: from24h, To: end, Level: aggregate.Minute,
			Buckets: series(from24h, end, aggregate.Minute, func(i int, _ time.Time) (float64, float64, bool) {
				return 21 + 3*math.Sin(float64(i)/1440*2*math.Pi), 0.5, true
			}),
		},
		// 1 h of minutes with minutes 20 to 29 and 45 empty, and raw
		// readings every 30 s but in the same minutes: three runs, the
		// raw line broken at the two gaps.
		"gaps_1h": {
			Title: "greenhouse: humidity", Unit: "%", From: from1h, To: end, Level: aggregate.Minute,
			Buckets: series(from1h, end, aggregate.Minute, func(i int, t time.Time) (float64, float64, bool) {
				m := t.Sub(from1h) / time.Minute
				return 50 + 10*math.Sin(float64(t.Unix()+30)/300), 1, !(m >= 20 && m < 30 || m == 45)
			}),
			Points: raw,
		},
		// One minute of data in 24 hours: a bar and a dot.
		"one_point": {
			Title: "shed: voltage", Unit: "V", From: from24h, To: end, Level: aggregate.Minute,
			Buckets: []Bucket{{Start: end.Add(-5 * time.Hour), Stats: statsOf(3.28, 3.31, 3.3)}},
		},
		// A freezer over 7 days of hours, from about −20 to +6 °C with a
		// defrost every day: the axis spans −30 to 10, with a zero line.
		"negative": {
			Title: "freezer: temperature", Unit: "°C", From: from7d, To: end, Level: aggregate.Hour,
			Buckets: series(from7d, end, aggregate.Hour, func(i int, t time.Time) (float64, float64, bool) {
				if t.Hour() == 3 {
					return 4, 2, true
				}
				return -18 + math.Sin(float64(i)), 1.5, true
			}),
		},
		// 90 days of the same value, with three days missing: a flat line
		// in the middle of a labelled span, in two runs.
		"flat": {
			Title: "attic: setpoint", Unit: "°C", From: from90d, To: end, Level: aggregate.Hour,
			Buckets: series(from90d, end, aggregate.Hour, func(_ int, t time.Time) (float64, float64, bool) {
				d := end.Sub(t) / day
				return 21.5, 0, d < 40 || d >= 43
			}),
		},
		// Nothing stored: the frame, the time axis and "no data".
		"empty": {
			Title: "porch: lux", Unit: "lx", From: from1h, To: end, Level: aggregate.Minute,
		},
	}
}

func statsOf(vs ...float64) aggregate.Stats {
	var s aggregate.Stats
	for _, v := range vs {
		s.Add(v)
	}
	return s
}

func TestWriteChart_Golden(t *testing.T) {
	for name, c := range goldenCharts() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteChart(&buf, c); err != nil {
				t.Fatal(err)
			}
			checkXML(t, buf.Bytes())
			path := filepath.Join("testdata", name+".svg")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s differs from the chart drawn now (go test -update rewrites it):\ngot:\n%s", path, buf.Bytes())
			}
		})
	}
}

// checkXML fails t unless doc is well-formed XML.
func checkXML(t *testing.T, doc []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
	}
}

// attr returns the value of attribute name of the first element of doc
// with class class.
func attr(t *testing.T, doc, class, name string) string {
	t.Helper()
	re := regexp.MustCompile(`<[a-z]+ class="` + class + `"[^>]*? ` + name + `="([^"]*)"`)
	m := re.FindStringSubmatch(doc)
	if m == nil {
		return ""
	}
	return m[1]
}

// texts returns the text of every <text> element within the first
// element of class class.
func texts(doc, class string) []string {
	i := strings.Index(doc, `class="`+class+`"`)
	if i < 0 {
		return nil
	}
	j := strings.Index(doc[i:], "</g>")
	var ts []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(doc[i:i+j], -1) {
		ts = append(ts, m[1])
	}
	return ts
}

func draw(t *testing.T, c Chart) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteChart(&buf, c); err != nil {
		t.Fatal(err)
	}
	checkXML(t, buf.Bytes())
	return buf.String()
}

func TestWriteChart_Axes(t *testing.T) {
	cs := goldenCharts()
	for _, tc := range []struct {
		name        string
		ylab, xlab  []string
		runs, singl int // subpaths of the mean line, single columns
	}{
		{"axis_24h", []string{"16", "18", "20", "22", "24", "26"}, []string{"12:00", "18:00", "Nov 27", "06:00", "12:00"}, 1, 0},
		{"gaps_1h", []string{"30", "40", "50", "60", "70"}, []string{"11:00", "11:15", "11:30", "11:45", "12:00"}, 3, 0},
		{"one_point", []string{"3.28", "3.29", "3.30", "3.31"}, nil, 0, 1},
		{"negative", []string{"-30", "-20", "-10", "0", "10"}, []string{"Nov 21", "Nov 22", "Nov 23", "Nov 24", "Nov 25", "Nov 26", "Nov 27"}, 1, 0},
		{"flat", []string{"18", "20", "22", "24"}, []string{"Aug 31", "Sep 14", "Sep 28", "Oct 12", "Oct 26", "Nov 9", "Nov 23"}, 2, 0},
		{"empty", nil, []string{"11:00", "11:15", "11:30", "11:45", "12:00"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := draw(t, cs[tc.name])
			if tc.ylab != nil {
				if got := texts(doc, "ylab"); !equal(got, tc.ylab) {
					t.Errorf("value labels %q, want %q", got, tc.ylab)
				}
			}
			if tc.xlab != nil {
				if got := texts(doc, "xlab"); !equal(got, tc.xlab) {
					t.Errorf("time labels %q, want %q", got, tc.xlab)
				}
			}
			if got := strings.Count(attr(t, doc, "mean", "d"), "M"); got != tc.runs {
				t.Errorf("mean line in %d runs, want %d", got, tc.runs)
			}
			if got := strings.Count(attr(t, doc, "mean1", "d"), "M"); got != tc.singl {
				t.Errorf("%d single columns, want %d", got, tc.singl)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriteChart_Gaps(t *testing.T) {
	doc := draw(t, goldenCharts()["gaps_1h"])
	// Raw readings every 30 s: the line breaks at the gap of ten
	// minutes, not at the one of a minute and a half.
	if got := strings.Count(attr(t, doc, "raw", "d"), "M"); got != 2 {
		t.Errorf("raw line in %d runs, want 2", got)
	}
	if got, want := strings.Count(attr(t, doc, "dots", "d"), "h0"), 120-20-2+1; got != want {
		t.Errorf("%d dots, want %d", got, want)
	}
	if !strings.Contains(doc, "; 2 gaps without data.</desc>") {
		t.Errorf("desc does not count 2 gaps:\n%s", doc)
	}
}

func TestWriteChart_Desc(t *testing.T) {
	c := goldenCharts()["one_point"]
	c.Location = time.FixedZone("CET", 3600)
	doc := draw(t, c)
	want := "<desc>shed: voltage, the 24 hours from Nov 26 13:00 CET to Nov 27 13:00 CET: " +
		"lowest 3.28 V (Nov 27 08:00 CET), highest 3.31 V (Nov 27 08:00 CET), latest 3.297 V (Nov 27 08:00 CET).</desc>"
	if !strings.Contains(doc, want) {
		t.Errorf("got %s\nwant it to hold %s", doc, want)
	}
	if !strings.Contains(doc, `role="img"`) || !strings.Contains(doc, "<title>shed: voltage</title>") {
		t.Errorf("no role or title: %s", doc)
	}
}

func TestWriteChart_Escapes(t *testing.T) {
	c := goldenCharts()["one_point"]
	c.Title = `<script>alert("x")</script>&`
	c.Unit = `'"<b>` + "\x01"
	doc := draw(t, c)
	if strings.Contains(doc, "<script") || strings.Contains(doc, "<b>") {
		t.Errorf("markup not escaped: %s", doc)
	}
}

func TestWriteChart_Bad(t *testing.T) {
	for _, c := range []Chart{
		{From: end, To: end, Level: aggregate.Minute},
		{From: end, To: end.Add(-time.Hour), Level: aggregate.Minute},
		{From: end.Add(-time.Hour), To: end},
	} {
		if err := WriteChart(io.Discard, c); !errors.Is(err, ErrBadChart) {
			t.Errorf("WriteChart(%v…%v, %v) = %v, want ErrBadChart", c.From, c.To, c.Level, err)
		}
	}
}

func TestNewValueAxis(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   valueAxis
		labels []string
	}{
		{18, 24, valueAxis{18, 24, 2, 0}, []string{"18", "20", "22", "24"}},
		{17.5, 24.5, valueAxis{16, 26, 2, 0}, nil},
		{-19.6, 6, valueAxis{-20, 10, 10, 0}, []string{"-20", "-10", "0", "10"}},
		{21.5, 21.5, valueAxis{18, 24, 2, 0}, nil},
		{0, 0, valueAxis{-1, 1, 0.5, 1}, []string{"-1.0", "-0.5", "0.0", "0.5", "1.0"}},
		{-0.3, -0.1, valueAxis{-0.3, -0.1, 0.05, 2}, nil},
		{3.28, 3.31, valueAxis{3.28, 3.31, 0.01, 2}, []string{"3.28", "3.29", "3.30", "3.31"}},
		{0, 1e6, valueAxis{0, 1e6, 5e5, 0}, []string{"0", "500000", "1000000"}},
	} {
		got := newValueAxis(tc.lo, tc.hi)
		if math.Abs(got.Lo-tc.want.Lo) > 1e-9 || math.Abs(got.Hi-tc.want.Hi) > 1e-9 ||
			got.Step != tc.want.Step || got.Decimals != tc.want.Decimals {
			t.Errorf("newValueAxis(%v, %v) = %+v, want %+v", tc.lo, tc.hi, got, tc.want)
		}
		if tc.labels != nil {
			var ls []string
			for _, v := range got.ticks() {
				ls = append(ls, got.label(v))
			}
			if !equal(ls, tc.labels) {
				t.Errorf("newValueAxis(%v, %v) labels %q, want %q", tc.lo, tc.hi, ls, tc.labels)
			}
		}
	}
}

func TestTimeTicks(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+1800)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no zone data: %v", err)
	}
	clock := func(ts []time.Time, loc *time.Location, layout string) []string {
		var s []string
		for _, t := range ts {
			s = append(s, t.In(loc).Format(layout))
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		from, to time.Time
		loc      *time.Location
		layout   string
		want     []string
	}{
		{"24h UTC", end.Add(-24 * time.Hour), end, time.UTC, "15:04", []string{"12:00", "18:00", "00:00", "06:00", "12:00"}},
		{"24h India", end.Add(-24 * time.Hour), end, ist, "15:04", []string{"18:00", "00:00", "06:00", "12:00"}},
		// Summer time ends on 2026-11-01 at 02:00 in New York: ticks
		// stay on the local 6-hour marks through the change.
		{"24h New York DST", time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC), ny, "Jan 2 15:04 MST",
			[]string{"Nov 1 00:00 EDT", "Nov 1 06:00 EST", "Nov 1 12:00 EST", "Nov 1 18:00 EST"}},
		{"1h", end.Add(-time.Hour), end, time.UTC, "15:04", []string{"11:00", "11:15", "11:30", "11:45", "12:00"}},
		{"7d New York", end.Add(-7 * day), end, ny, "Mon Jan 2 15:04", []string{"Sat Nov 21 00:00", "Sun Nov 22 00:00", "Mon Nov 23 00:00", "Tue Nov 24 00:00", "Wed Nov 25 00:00", "Thu Nov 26 00:00", "Fri Nov 27 00:00"}},
		{"90d", end.Add(-90 * day), end, time.UTC, "Mon Jan 2", []string{"Mon Aug 31", "Mon Sep 14", "Mon Sep 28", "Mon Oct 12", "Mon Oct 26", "Mon Nov 9", "Mon Nov 23"}},
	} {
		step := timeStep(tc.to.Sub(tc.from))
		if got := clock(timeTicks(tc.from, tc.to, step, tc.loc), tc.loc, tc.layout); !equal(got, tc.want) {
			t.Errorf("%s: ticks %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{21, "21"}, {-0.0, "0"}, {21.5, "21.5"}, {21.299999999, "21.3"}, {3.2967, "3.297"},
		{0.01234, "0.0123"}, {1234.56, "1234.6"}, {-18.25, "-18.25"}, {-0.0001, "-0.0001"},
		{0.00001234, "1.234e-05"}, {1.5e7, "15000000"}, {1.5e7 + 0.5, "1.5e+07"}, {-0.00004, "-4e-05"},
	} {
		if got := FormatValue(tc.v); got != tc.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
