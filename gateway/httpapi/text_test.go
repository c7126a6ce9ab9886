package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// storeTexts stores, 10, 25, 40 and 50 minutes into the hour before now,
// the states heat, off, a hostile text and heat of hall's mode, a
// button's action at the same times, and a number of hall's temperature;
// and cool, the mode two hours before now.
func storeTexts(t *testing.T, a *testAPI, now time.Time) (from time.Time) {
	t.Helper()
	from = now.Add(-time.Hour)
	at := func(m int) int64 { return from.Add(time.Duration(m) * time.Minute).UnixNano() }
	a.store(t, buffer.Reading{Device: "hall", Metric: "mode", TS: now.Add(-2 * time.Hour).UnixNano(), Text: "cool"})
	var rs []buffer.Reading
	for i, s := range []string{"heat", "off", `<script>"x"</script>`, "heat"} {
		m := []int{10, 25, 40, 50}[i]
		rs = append(rs,
			buffer.Reading{Device: "hall", Metric: "mode", TS: at(m), Text: s},
			buffer.Reading{Device: "hall", Metric: "action", TS: at(m), Text: []string{"single", "double", "single", "hold"}[i]},
			buffer.Reading{Device: "hall", Metric: "temp", TS: at(m), Value: 20 + float64(i), Unit: "°C"})
	}
	a.store(t, rs...)
	return from
}

// The page charts a text series from the store as a timeline: a state
// series as bands from the state before the range on, an event series
// as ticks; a number series as before.
func TestPage_TextCharts(t *testing.T) {
	a := newTestAPI(t)
	now := time.Now()
	storeTexts(t, a, now)
	rec := a.request("/?part=charts&device=hall&range=1h")
	if rec.Code != http.StatusOK {
		t.Fatalf("charts: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	svgs := map[string]string{}
	for _, svg := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(body, -1) {
		title, _ := between(svg, "<title>", "</title>")
		svgs[title] = svg
	}
	texts := func(svg, class string) []string {
		var out []string
		attr := regexp.MustCompile(` data-text="([^"]*)"`)
		for _, tag := range regexp.MustCompile(`<[a-z]+ class="`+class+`[ "][^>]*>`).FindAllString(svg, -1) {
			m := attr.FindStringSubmatch(tag)
			if m == nil {
				m = []string{"", ""}
			}
			out = append(out, m[1])
		}
		return out
	}
	mode, action, temp := svgs["hall: mode"], svgs["hall: action"], svgs["hall: temp"]
	if !strings.Contains(mode, `class="chart timeline"`) || !strings.Contains(action, `class="chart timeline events"`) || !strings.Contains(temp, `class="mean`) {
		t.Fatalf("want mode as bands, action as ticks, temp as numbers:\n%s", body)
	}
	// cool, from before the range, until the first reading: nothing unknown.
	if got, want := texts(mode, "state"), []string{"cool", "heat", "off", "&lt;script&gt;&#34;x&#34;&lt;/script&gt;", "heat"}; !slices.Equal(got, want) {
		t.Errorf("mode's bands: %q, want %q", got, want)
	}
	if got, want := texts(action, "tick"), []string{"single", "double", "hold"}; !slices.Equal(got, want) {
		t.Errorf("action's ticks: %q, want %q", got, want)
	}
	if strings.Contains(body, "<script>") {
		t.Errorf("a text written as markup:\n%s", body)
	}

	// The device list shows the latest text of each text series.
	body = a.request("/?part=devices").Body.String()
	for _, want := range []string{"<li>mode <b>heat</b></li>", "<li>action <b>hold</b></li>", "<li>temp <b>23</b> °C</li>"} {
		if !strings.Contains(body, want) {
			t.Errorf("devices: no %q in\n%s", want, body)
		}
	}
}

// /readings answers "text" for a text reading, /latest and /v1/devices
// too, CSV a text column.
func TestReadings_Text(t *testing.T) {
	a := newTestAPI(t)
	now := time.Now()
	storeTexts(t, a, now)

	var doc struct {
		Readings []map[string]any `json:"readings"`
	}
	if code := a.get(t, "/v1/devices/hall/readings?metric=mode&order=asc&limit=2&from=0", &doc); code != http.StatusOK {
		t.Fatalf("readings: %d", code)
	}
	if len(doc.Readings) != 2 || doc.Readings[0]["text"] != "cool" || doc.Readings[1]["text"] != "heat" {
		t.Errorf("readings of mode: %v, want cool then heat", doc.Readings)
	}
	for _, r := range doc.Readings {
		if _, ok := r["value"]; ok {
			t.Errorf("a text reading with a value: %v", r)
		}
	}
	doc.Readings = nil
	if code := a.get(t, "/v1/devices/hall/readings?metric=temp&limit=1", &doc); code != http.StatusOK || len(doc.Readings) != 1 ||
		doc.Readings[0]["value"] != 23.0 || doc.Readings[0]["text"] != nil {
		t.Errorf("readings of temp: %d %v, want value 23 and no text", code, doc.Readings)
	}

	var latest struct {
		Latest map[string]map[string]any `json:"latest"`
	}
	if code := a.get(t, "/v1/devices/hall/latest", &latest); code != http.StatusOK {
		t.Fatalf("latest: %d", code)
	}
	if m := latest.Latest["mode"]; m["text"] != "heat" || m["value"] != nil {
		t.Errorf("latest mode: %v, want text heat and no value", m)
	}
	if m := latest.Latest["temp"]; m["value"] != 23.0 || m["text"] != nil {
		t.Errorf("latest temp: %v, want value 23 and no text", m)
	}
	var devs struct {
		Devices []struct {
			Latest map[string]map[string]any `json:"latest"`
		} `json:"devices"`
	}
	if code := a.get(t, "/v1/devices", &devs); code != http.StatusOK || len(devs.Devices) != 1 || devs.Devices[0].Latest["action"]["text"] != "hold" {
		t.Errorf("devices: %d %+v, want hall's latest action hold", code, devs)
	}

	rec := a.request("/v1/devices/hall/readings?format=csv&limit=100&from=" + now.Add(-time.Hour).UTC().Format(time.RFC3339))
	lines := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
	if lines[0] != "time,metric,value,unit,text" {
		t.Errorf("CSV header %q, want a text column last", lines[0])
	}
	var script, number bool
	for _, l := range lines[1:] {
		script = script || strings.HasSuffix(l, `,"mode",,"","<script>""x""</script>"`)
		number = number || strings.HasSuffix(l, `,"temp",21,"°C",""`)
	}
	if !script || !number {
		t.Errorf("CSV: want the hostile text quoted with no value, and a number with an empty text:\n%s", rec.Body)
	}
	rec = a.request("/v1/devices/hall/readings?format=csv&metric=temp")
	if got, _, _ := strings.Cut(rec.Body.String(), "\n"); got != "time,metric,value,unit" {
		t.Errorf("CSV of numbers only: header %q, want the four columns it always had", got)
	}
}

// /metrics shows a text series as a state set: 1 for its newest text, 0
// for the others it has held, label values escaped.
func TestMetrics_States(t *testing.T) {
	a := newTestAPIWith(t, testAPIOptions{metricsReadings: true})
	storeTexts(t, a, time.Now())
	rec := a.request("/metrics")
	var got []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "cairn_state{") || strings.HasPrefix(l, "cairn_reading{") {
			got = append(got, l)
		}
	}
	want := []string{
		`cairn_reading{device="hall",metric="temp",unit="°C"} 23`,
		`cairn_state{device="hall",metric="action",state="double"} 0`,
		`cairn_state{device="hall",metric="action",state="hold"} 1`,
		`cairn_state{device="hall",metric="action",state="single"} 0`,
		`cairn_state{device="hall",metric="mode",state="<script>\"x\"</script>"} 0`,
		`cairn_state{device="hall",metric="mode",state="cool"} 0`,
		`cairn_state{device="hall",metric="mode",state="heat"} 1`,
		`cairn_state{device="hall",metric="mode",state="off"} 0`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("metrics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The JSON of a text reading carries no value, and of a number no text.
func TestReadingJSON_Text(t *testing.T) {
	for _, tc := range []struct {
		r    any
		want string
	}{
		{readingJSON{Metric: "mode", TS: "t", Text: "heat"}, `{"metric":"mode","ts":"t","text":"heat"}`},
		{readingJSON{Metric: "temp", TS: "t", Value: 0}, `{"metric":"temp","ts":"t","value":0}`},
		{latestJSON{TS: "t", Text: "on", Unit: "u"}, `{"ts":"t","text":"on","unit":"u"}`},
		{latestJSON{TS: "t", Value: 1.5}, `{"ts":"t","value":1.5}`},
	} {
		got, err := json.Marshal(tc.r)
		if err != nil || string(got) != tc.want {
			t.Errorf("%+v: %s %v, want %s", tc.r, got, err, tc.want)
		}
	}
}

// A text series with more readings in the range than a chart is drawn
// from is drawn from the newest dashboard.MaxTexts: the time before them
// unknown, the <desc> saying so, the bands no more than the columns.
func TestPage_TextChartTruncated(t *testing.T) {
	a := newTestAPI(t)
	now := time.Now()
	n := dashboard.MaxTexts * 11 / 10 // the oldest tenth left out: 5 minutes unknown
	step := time.Hour / time.Duration(n+1)
	rs := []buffer.Reading{{Device: "mill", Metric: "status", TS: now.Add(-2 * time.Hour).UnixNano(), Text: "idle"}}
	for i := range n {
		rs = append(rs, buffer.Reading{Device: "mill", Metric: "status", TS: now.Add(-time.Hour + time.Duration(i+1)*step).UnixNano(), Text: []string{"run", "run", "stop"}[i%3]})
	}
	a.store(t, rs...)
	body := a.request("/?part=charts&device=mill&range=1h").Body.String()
	if !strings.Contains(body, "left out, too many to draw.</desc>") {
		t.Errorf("no word of the readings left out:\n%.2000s", body)
	}
	if !strings.Contains(body, `class="state unknown"`) || strings.Contains(body, `data-text="idle"`) {
		t.Errorf("want the time before the newest readings unknown, not idle:\n%.2000s", body)
	}
	if got := strings.Count(body, `<rect class="state`); got < 2 || got > dashboard.MaxColumns {
		t.Errorf("%d bands, want 2 to %d", got, dashboard.MaxColumns)
	}
}
