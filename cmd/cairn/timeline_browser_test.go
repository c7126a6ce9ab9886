package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// hostile are texts as a device may send them: markup that would run if
// it were written as markup, quotes, an ampersand, emoji.
var hostile = []string{`<script>window.pwned=1</script>`, `<img src=x onerror="window.pwned=2">`, `"on" & 'off'`, "🔥 heat"}

// TestDashboard_TimelineBrowser opens, in headless chromium, a page the
// dashboard writes from readings of its own: a series of states and one
// of events, with hostile texts among them. Every band and tick is drawn
// with its text, in order, with a width; the legend names each text; no
// text runs as markup.
func TestDashboard_TimelineBrowser(t *testing.T) {
	now := time.Now().Truncate(time.Minute)
	from, to := dashboard.Range1h.Window(now)
	at := func(m int) time.Time { return from.Add(time.Duration(m) * time.Minute) }
	states := []string{"heat", "off", hostile[0], "heat", hostile[1], hostile[2], hostile[3], "cool"}
	var mode []dashboard.Text
	for i, s := range states {
		mode = append(mode, dashboard.Text{Time: at(4 + 7*i), Text: s})
	}
	events := []string{"single", "double", "single", "hold", hostile[0], "single", hostile[3]}
	var action []dashboard.Text
	for i, s := range events {
		action = append(action, dashboard.Text{Time: at(3 + 8*i), Text: s})
	}
	p := dashboard.Page{
		Now: now, Device: "hall", Range: dashboard.Range1h,
		Devices: []dashboard.Device{{ID: "hall", LastSeen: now}},
		Health:  dashboard.Health{MQTT: dashboard.MQTT{Mode: "embedded", Connected: true}},
		Charts: []dashboard.Chart{
			{Title: "hall: mode", From: from, To: to, Level: aggregate.Minute, Texts: mode},
			{Title: "hall: action", From: from, To: to, Level: aggregate.Minute, Texts: action, Events: true},
		},
	}
	var page bytes.Buffer
	if err := dashboard.WritePage(&page, p); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page.Bytes()) //nolint:errcheck // the browser went away
	}))
	t.Cleanup(srv.Close)

	b := startBrowser(t)
	b.do(t, "open the page", chromedp.Navigate(srv.URL+"/"))
	waitJS(t, b, startTimeout, "two timelines", `document.querySelectorAll("svg.timeline").length === 2`, `document.title`)
	checkTimeline(t, b, "hall: mode", []string{"", "heat", "off", hostile[0], "heat", hostile[1], hostile[2], hostile[3], "cool"},
		[]string{"heat", hostile[2], hostile[1], hostile[0], "cool", "off", hostile[3], ""})
	checkTicks(t, b, "hall: action", map[string]int{"single": 3, "double": 1, "hold": 1, hostile[0]: 1, hostile[3]: 1})
	if got := eval[string](t, b, `String(window.pwned) + " " + document.querySelectorAll("script, img").length`); got != "undefined 1" {
		t.Errorf("a text ran as markup: window.pwned, scripts and images are %s; want undefined and the page's one script", got)
	}
	b.checkProblems(t, "the timelines")
}

// TestDashboard_TimelineRun opens the charts of a `cairn run` process in
// headless chromium, after a paho client published to its broker a
// device's states (JSON string fields of mode), its events (action) and
// a number (temperature), hostile texts among them. The states are
// bands from the state before the hour on, the events ticks, the number
// a chart of numbers, every text in the legend; the page's policy
// allows it all and no text runs; on a phone the timelines fit the
// screen and their text is legible. /latest and /metrics give the texts
// back.
//
// With CAIRN_SCREENSHOT_TIMELINE set to a file name (relative to the
// repository's root), it writes a screenshot of the charts there:
//
//	CAIRN_SCREENSHOT_TIMELINE=docs/img/timeline.png go test ./cmd/cairn -run TestDashboard_TimelineRun
func TestDashboard_TimelineRun(t *testing.T) {
	bin := cairnBinary.get(t)
	c := startCairn(t, bin, writeConfig(t, t.TempDir(), telemetryConfig(`{temperature: "°C"}`, "  metrics_readings: true\n")))
	pub := mustConnect(t, c.mqtt, "timeline")
	now := time.Now()
	at := func(m int) time.Time { return now.Add(time.Duration(m-60) * time.Minute) }
	publish := func(ts time.Time, field string, v any) {
		t.Helper()
		doc, err := json.Marshal(map[string]any{"ts": ts.UnixMilli(), field: v})
		if err != nil {
			t.Fatal(err)
		}
		waitToken(t, pub.Publish("sensors/hall/telemetry", 1, false, doc))
	}
	// (An "off" would be a text here too: a state word in a text series
	// is its text, TestRun_ModesWithOff.)
	publish(now.Add(-3*time.Hour), "mode", "eco")
	for i, s := range []string{"heat", "idle", hostile[0], "heat", hostile[3], "cool"} {
		publish(at(5+9*i), "mode", s)
	}
	for i, s := range []string{"single", "double", "single", "hold", hostile[1], "single"} {
		publish(at(7+8*i), "action", s)
	}
	for i := range 5 {
		publish(at(10*i+5), "temperature", 20+i)
	}

	// The API gives the texts back: the latest, and on /metrics as state
	// sets, label values escaped.
	api := newAPIClient(c.http)
	var latest struct {
		Latest map[string]map[string]any `json:"latest"`
	}
	if code := api.get(t, "/v1/devices/hall/latest", &latest); code != http.StatusOK || latest.Latest["mode"]["text"] != "cool" ||
		latest.Latest["action"]["text"] != "single" || latest.Latest["temperature"]["value"] != 24.0 {
		t.Errorf("latest: %d %v, want mode cool, action single, temperature 24", code, latest.Latest)
	}
	_, metrics, err := api.fetch("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cairn_state{device="hall",metric="mode",state="cool"} 1`,
		`cairn_state{device="hall",metric="mode",state="eco"} 0`,
		`cairn_state{device="hall",metric="action",state="<img src=x onerror=\"window.pwned=2\">"} 0`,
		`cairn_reading{device="hall",metric="temperature",unit="°C"} 24`,
	} {
		if !bytes.Contains(metrics, []byte("\n"+want+"\n")) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	b := startBrowser(t)
	b.do(t, "open the charts of hall", chromedp.Navigate("http://"+c.http+"/?device=hall&range=1h"))
	waitJS(t, b, startTimeout, "two timelines and a chart of numbers",
		`document.querySelectorAll("svg.timeline").length === 2 && document.querySelectorAll("svg.chart:not(.timeline) .mean, svg.chart:not(.timeline) .mean1").length > 0`,
		`[...document.querySelectorAll("svg title")].map(t => t.textContent).join(", ")`)
	// eco, from before the hour, until the first reading: nothing unknown.
	checkTimeline(t, b, "hall: mode", []string{"eco", "heat", "idle", hostile[0], "heat", hostile[3], "cool"},
		[]string{"heat", "cool", hostile[0], "idle", hostile[3], "eco"})
	checkTicks(t, b, "hall: action", map[string]int{"single": 3, "double": 1, "hold": 1, hostile[1]: 1})
	if got := eval[string](t, b, `String(window.pwned) + " " + document.querySelectorAll("script, img").length`); got != "undefined 1" {
		t.Errorf("a text ran as markup: window.pwned, scripts and images are %s; want undefined and the page's one script", got)
	}
	b.checkProblems(t, "the timelines of cairn run")
	if path := os.Getenv("CAIRN_SCREENSHOT_TIMELINE"); path != "" {
		eval[bool](t, b, `document.querySelectorAll("body > :not(main), main > :not(#charts)").forEach(e => e.remove()), true`)
		screenshot(t, b, path)
	}
	checkPhone(t, b, "http://"+c.http+"/?device=hall&range=1h")
	b.checkProblems(t, "the timelines on a phone")
}

// figure is the JavaScript expression of the <svg> of the chart titled
// title.
func figure(title string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("svg.timeline")].find(s => s.querySelector("title").textContent === %q)`, title)
}

// checkTimeline checks the chart titled title: its bands have, left to
// right, the texts bands ("" for unknown time), each wider than nothing
// and starting where the one before ends; its legend names keys in this
// order, each key visible.
func checkTimeline(t *testing.T, b *browser, title string, bands, keys []string) {
	t.Helper()
	type box struct {
		Text  string  `json:"text"`
		Left  float64 `json:"left"`
		Right float64 `json:"right"`
	}
	got := eval[[]box](t, b, `[...`+figure(title)+`.querySelectorAll("rect.state")].map(r => {
		const b = r.getBoundingClientRect();
		return {text: r.dataset.text || "", left: b.left, right: b.right};
	})`)
	if len(got) != len(bands) {
		t.Fatalf("%s: %d bands %+v, want %d", title, len(got), got, len(bands))
	}
	for i, g := range got {
		if g.Text != bands[i] {
			t.Errorf("%s: band %d has the text %q, want %q", title, i, g.Text, bands[i])
		}
		if g.Right-g.Left < 1 {
			t.Errorf("%s: band %d (%q) is %.1f pixels wide", title, i, g.Text, g.Right-g.Left)
		}
		if i > 0 && abs(g.Left-got[i-1].Right) > 0.5 {
			t.Errorf("%s: band %d starts at %.1f, the one before ends at %.1f", title, i, g.Left, got[i-1].Right)
		}
	}
	checkLegend(t, b, title, keys)
}

// checkTicks checks that the chart titled title has a path of ticks per
// text, with as many ticks as counts says, and a legend naming each text
// with its count.
func checkTicks(t *testing.T, b *browser, title string, counts map[string]int) {
	t.Helper()
	got := eval[map[string]int](t, b, `Object.fromEntries([...`+figure(title)+`.querySelectorAll("path.tick")].map(p =>
		[p.dataset.text, p.getAttribute("d").split("M").length - 1]))`)
	if fmt.Sprint(got) != fmt.Sprint(counts) {
		t.Errorf("%s: ticks %v, want %v", title, got, counts)
	}
	type key struct {
		Text  string `json:"text"`
		Shown string `json:"shown"`
	}
	keys := eval[[]key](t, b, `[...`+figure(title)+`.querySelectorAll("g.key")].map(k => ({text: k.dataset.text, shown: k.querySelector("text").textContent}))`)
	for _, k := range keys {
		if want := fmt.Sprint(counts[k.Text]); len(k.Shown) < len(want) || k.Shown[len(k.Shown)-len(want):] != want {
			t.Errorf("%s: the key of %q says %q, want its count %s", title, k.Text, k.Shown, want)
		}
	}
	if len(keys) != len(counts) {
		t.Errorf("%s: %d keys %+v, want %d", title, len(keys), keys, len(counts))
	}
}

// checkLegend checks that the legend of the chart titled title names
// keys, in this order, and that each key is drawn within the chart.
func checkLegend(t *testing.T, b *browser, title string, keys []string) {
	t.Helper()
	type key struct {
		Text    string `json:"text"`
		Visible bool   `json:"visible"`
	}
	got := eval[[]key](t, b, `(s => [...s.querySelectorAll("g.key")].map(k => {
		const b = k.getBoundingClientRect(), c = s.getBoundingClientRect();
		return {text: k.dataset.text || "", visible: b.width > 0 && b.left >= c.left && b.right <= c.right && b.bottom <= c.bottom};
	}))(`+figure(title)+`)`)
	if len(got) != len(keys) {
		t.Fatalf("%s: legend %+v, want %q", title, got, keys)
	}
	for i, k := range got {
		if k.Text != keys[i] || !k.Visible {
			t.Errorf("%s: key %d is %q (visible %v), want %q, visible", title, i, k.Text, k.Visible, keys[i])
		}
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
