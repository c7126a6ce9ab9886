package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// storeSeries stores a reading of each metric of device every minute
// for the hour before now, the value the minute's index.
func (a *testAPI) storeSeries(t *testing.T, device string, now time.Time, metrics ...string) {
	t.Helper()
	var rs []buffer.Reading
	for i := range 60 {
		ts := now.Add(-time.Duration(60-i) * time.Minute).UnixNano()
		for _, m := range metrics {
			rs = append(rs, buffer.Reading{Device: device, Metric: m, TS: ts, Value: float64(i), Unit: "°C"})
		}
	}
	a.store(t, rs...)
}

// The page lists every device with its latest values, and draws a
// chart per metric of the first device.
func TestPage_DevicesAndCharts(t *testing.T) {
	a := newTestAPI(t)
	now := time.Now()
	a.storeSeries(t, "kitchen", now, "temp", "hum")
	a.storeSeries(t, "porch", now, "temp")

	rec := a.request("/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{">kitchen</a>", ">porch</a>", "Charts of kitchen", "<b>59</b> °C"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /: no %q in the page", want)
		}
	}
	if got := strings.Count(body, "<svg"); got != 2 {
		t.Errorf("GET /: got %d charts, want 2 (one per metric of kitchen)", got)
	}
	for name, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"X-Content-Type-Options": "",
	} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	// The policy allows the page's own inline style and script, as served.
	csp := rec.Header().Get("Content-Security-Policy")
	script, _ := between(body, "<script>", "</script>")
	style, _ := between(body, "<style>", "</style>")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src "+hashSource(script)+";") ||
		!strings.Contains(csp, "style-src "+hashSource(style)+";") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy: got %q", csp)
	}
}

// Each part is answered alone, and the range and zone change the charts.
func TestPage_PartsRangesZones(t *testing.T) {
	a := newTestAPI(t)
	now := time.Now()
	a.storeSeries(t, "kitchen", now, "temp")
	a.storeSeries(t, "porch", now, "temp", "hum")

	health := a.request("/?part=health")
	if health.Code != http.StatusOK || !strings.Contains(health.Body.String(), "Ingest") || strings.Contains(health.Body.String(), "<html") {
		t.Errorf("part health: %d %s", health.Code, health.Body)
	}
	devices := a.request("/?part=devices")
	if b := devices.Body.String(); devices.Code != http.StatusOK || !strings.Contains(b, ">kitchen</a>") || !strings.Contains(b, ">porch</a>") || strings.Contains(b, "Ingest") {
		t.Errorf("part devices: %d %s", devices.Code, b)
	}
	charts := map[string]string{}
	for _, r := range []string{"1h", "24h", "7d", "90d"} {
		rec := a.request("/?part=charts&device=porch&range=" + r)
		b := rec.Body.String()
		if rec.Code != http.StatusOK || strings.Count(b, "<svg") != 2 || strings.Contains(b, "Ingest") {
			t.Errorf("part charts, range %s: %d, %d charts, want 200 and 2", r, rec.Code, strings.Count(b, "<svg"))
		}
		charts[r] = b
	}
	if charts["1h"] == charts["24h"] || charts["24h"] == charts["7d"] || charts["7d"] == charts["90d"] {
		t.Error("the charts of different ranges are the same")
	}
	// The 1-hour chart draws the raw readings, the others do not; the
	// whole page takes the range too.
	if !strings.Contains(charts["1h"], `class="raw"`) || strings.Contains(charts["24h"], `class="raw"`) {
		t.Error("raw readings: want them drawn over 1h only")
	}
	if page := a.request("/?device=porch&range=7d").Body.String(); !strings.Contains(page, `aria-pressed="true">7d<`) || strings.Count(page, "<svg") != 2 {
		t.Error("page of porch over 7d: range or charts missing")
	}

	for target, zone := range map[string]string{
		"/?device=porch&tz=Asia/Kolkata":              "Asia/Kolkata",
		"/?part=charts&device=porch&tz=Europe/Berlin": "Europe/Berlin",
		"/?device=porch&tz=Not/AZone":                 "UTC",
		"/?device=porch":                              "UTC",
	} {
		if b := a.request(target).Body.String(); !strings.Contains(b, `data-tz="`+zone+`"`) {
			t.Errorf("GET %s: charts not drawn for %s", target, zone)
		}
	}

	for _, target := range []string{"/?range=2h", "/?part=charts&range=1d", "/?part=nav", "/?part="} {
		rec := a.request(target)
		if target == "/?part=" {
			// An empty part is the whole page.
			if rec.Code != http.StatusOK {
				t.Errorf("GET %s: %d, want 200", target, rec.Code)
			}
			continue
		}
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "want") {
			t.Errorf("GET %s: %d %s, want 400 saying what is wanted", target, rec.Code, rec.Body)
		}
	}
}

// A device without readings answers 404: the page without charts, so
// that the list offers the devices there are; its charts part, nothing.
func TestPage_UnknownDevice(t *testing.T) {
	a := newTestAPI(t)
	a.storeSeries(t, "kitchen", time.Now(), "temp")
	rec := a.request("/?device=attic")
	if b := rec.Body.String(); rec.Code != http.StatusNotFound || !strings.Contains(b, ">kitchen</a>") || strings.Contains(b, "<svg") {
		t.Errorf("page of an unknown device: %d, want 404 with the device list and no chart", rec.Code)
	}
	if rec := a.request("/?part=charts&device=attic"); rec.Code != http.StatusNotFound {
		t.Errorf("charts of an unknown device: %d, want 404", rec.Code)
	}
	// No device at all: the page says so.
	empty := newTestAPI(t)
	if rec := empty.request("/"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "No device has sent a reading yet") {
		t.Errorf("page without devices: %d", rec.Code)
	}
}

func TestPage_Favicon(t *testing.T) {
	a := newTestAPI(t)
	if rec := a.request("/favicon.ico"); rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Errorf("favicon: %d %q, want 204", rec.Code, rec.Body)
	}
	// Only / itself is the page.
	if rec := a.request("/index.html"); rec.Code != http.StatusNotFound {
		t.Errorf("/index.html: %d, want 404", rec.Code)
	}
}

func TestRateSampler(t *testing.T) {
	var s rateSampler
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.rate(t0, 0)
	for i, c := range []struct {
		after  time.Duration
		stored uint64
		want   float64
	}{
		{10 * time.Second, 100, 10},
		{30 * time.Second, 300, 10},
		{60 * time.Second, 600, 10},
		{90 * time.Second, 600, 5},  // since 30 s: 300 in 60 s
		{150 * time.Second, 600, 0}, // since 90 s: nothing
	} {
		if got := s.rate(t0.Add(c.after), c.stored); got != c.want {
			t.Errorf("%d: at %v: got %v/s, want %v/s", i, c.after, got, c.want)
		}
	}
}
