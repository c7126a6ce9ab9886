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
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'sha256-") {
		t.Errorf("Content-Security-Policy: got %q", csp)
	}
}
