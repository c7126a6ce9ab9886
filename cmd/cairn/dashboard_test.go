package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// TestRun_DashboardHTTP: a reading published over MQTT to `cairn run`
// shows on its page, GET /, with a chart of its metric; with
// http.token_file the page first asks for the token, and the session it
// starts opens the API too.
func TestRun_DashboardHTTP(t *testing.T) {
	token := writeFile(t, t.TempDir(), "token", []byte("s3cret-token-0123\n"), 0o600)
	d := startDaemon(t, writeConfig(t, t.TempDir(), telemetryConfig(`{temperature: "°C"}`, "  token_file: "+token+"\n")))
	pub := mustConnect(t, d.mqtt, "dashboard-publisher")
	now := time.Now()
	for i, v := range []float64{20.5, 21.25} {
		body := fmt.Sprintf(`{"ts":%d,"temperature":%g}`, now.Add(time.Duration(i-2)*time.Minute).UnixMilli(), v)
		if err := publish1(pub, "sensors/greenhouse/telemetry", body); err != nil {
			t.Fatal(err)
		}
	}

	var session *http.Cookie
	c := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	do := func(method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+d.http+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if session != nil {
			req.AddCookie(session)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}

	if res, body := do(http.MethodGet, "/", nil); res.StatusCode != http.StatusOK || !strings.Contains(body, `action="/login"`) {
		t.Fatalf("GET / without a session: %d, want the login form:\n%s", res.StatusCode, body)
	}
	if res, _ := do(http.MethodGet, "/v1/devices", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/devices without a session: %d, want 401", res.StatusCode)
	}
	res, _ := do(http.MethodPost, "/login", url.Values{"token": {"s3cret-token-0123"}, "next": {"/"}})
	for _, ck := range res.Cookies() {
		if ck.Name == "cairn_session" {
			session = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("POST /login: %d, cookies %v, want 303 and a session", res.StatusCode, res.Cookies())
	}
	res, body := do(http.MethodGet, "/", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / with a session: %d\n%s", res.StatusCode, body)
	}
	for _, want := range []string{">greenhouse</a>", "temperature <b>21.25</b> °C", "Charts of greenhouse", "Embedded broker"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /: no %q in the page", want)
		}
	}
	if n := strings.Count(body, "<svg"); n != 1 {
		t.Errorf("GET /: %d charts, want 1", n)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'sha256-") {
		t.Errorf("Content-Security-Policy: %q", csp)
	}
	if res, _ := do(http.MethodGet, "/v1/devices", nil); res.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/devices with a session: %d, want 200", res.StatusCode)
	}
	if res, _ := do(http.MethodGet, "/favicon.ico", nil); res.StatusCode != http.StatusNoContent {
		t.Errorf("GET /favicon.ico: %d, want 204", res.StatusCode)
	}
}

// publishWide publishes one reading of each of n metrics (m0000, m0001,
// …) of device, 100 metrics a message, and returns their names.
func publishWide(t *testing.T, pub paho.Client, device string, n int) []string {
	t.Helper()
	names := make([]string, n)
	at := time.Now().Add(-time.Hour).UnixMilli()
	var doc strings.Builder
	for i := range names {
		names[i] = fmt.Sprintf("m%04d", i)
		if doc.Len() == 0 {
			fmt.Fprintf(&doc, `{"ts":%d`, at)
		}
		fmt.Fprintf(&doc, `,%q:%d`, names[i], i)
		if (i+1)%100 == 0 || i == n-1 {
			if err := publish1(pub, "sensors/"+device+"/telemetry", doc.String()+"}"); err != nil {
				t.Fatal(err)
			}
			doc.Reset()
		}
	}
	return names
}

// TestRun_DashboardManyMetrics: a device with 1,000 metrics (the default
// store.max_series_per_device) costs one page of charts, not 1,000: the
// charts part of `cairn run` draws 12, says how many metrics there are
// and links to the next page; a filter by name and the last page chart
// the others; the device list shows 12 latest values and how many more
// there are; a bad page is a 400.
func TestRun_DashboardManyMetrics(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), telemetryConfig(`{}`, "")))
	pub := mustConnect(t, d.mqtt, "wide-publisher")
	publishWide(t, pub, "wide", 1000)
	api := newAPIClient(d.http)
	get := func(path string, wantCode int) string {
		t.Helper()
		code, body, err := api.fetch(path)
		if err != nil || code != wantCode {
			t.Fatalf("GET %s: %d %v, want %d\n%.2000s", path, code, err, wantCode, body)
		}
		return string(body)
	}
	captions := func(body string) []string {
		var out []string
		for _, f := range strings.Split(body, "<figcaption>")[1:] {
			out = append(out, strings.TrimPrefix(f[:strings.Index(f, "</figcaption>")], "wide: "))
		}
		return out
	}
	for _, c := range []struct {
		query string
		first string // the first metric charted
		n     int    // charts
		says  []string
	}{
		{"", "m0000", 12, []string{"wide has 1,000 metrics; charts of 1–12, 12 a page.", "Page 1 of 84",
			`<a href="?device=wide&amp;page=2&amp;range=90d#charts" rel="next">Next 12 →</a>`}},
		{"&page=2", "m0012", 12, []string{"charts of 13–24", "Page 2 of 84",
			`<a href="?device=wide&amp;range=90d#charts" rel="prev">`, `<a href="?device=wide&amp;page=3&amp;range=90d#charts" rel="next">`}},
		{"&page=84", "m0996", 4, []string{"charts of 997–1,000", "Page 84 of 84"}},
		{"&page=85", "m0996", 4, []string{"Page 84 of 84"}}, // one past the last is the last
		{"&filter=M09&page=2", "m0912", 12, []string{"wide has 1,000 metrics, 100 with “M09” in the name; charts of 13–24", "Page 2 of 9",
			`<a href="?device=wide&amp;filter=M09&amp;page=3&amp;range=90d#charts" rel="next">`}},
		{"&filter=nothing", "", 0, []string{"No metric of wide has “nothing” in its name."}},
	} {
		body := get("/?part=charts&device=wide&range=90d"+c.query, http.StatusOK)
		got := captions(body)
		if len(got) != c.n || strings.Count(body, "<svg") != c.n || c.n > 0 && got[0] != c.first {
			t.Errorf("charts%s: %d charts %q, want %d from %s", c.query, len(got), got, c.n, c.first)
		}
		for _, want := range c.says {
			if !strings.Contains(body, want) {
				t.Errorf("charts%s: no %q in\n%.1500s", c.query, want, body)
			}
		}
	}
	for _, bad := range []string{"page=0", "page=x", "filter=" + strings.Repeat("m", 129)} {
		if body := get("/?device=wide&"+bad, http.StatusBadRequest); !strings.Contains(body, strings.SplitN(bad, "=", 2)[0]+": ") {
			t.Errorf("?%s: 400 %q, want the parameter named", bad, body)
		}
	}

	page := get("/?device=wide&range=90d", http.StatusOK)
	for _, want := range []string{"m0011 <b>11</b>", `988 more metrics</a>`, `<input id="filter" name="filter" type="search"`} {
		if !strings.Contains(page, want) {
			t.Errorf("GET /: no %q in the page", want)
		}
	}
	if strings.Contains(page, "m0012 <b>") || strings.Count(page, "<svg") != 12 {
		t.Errorf("GET /: %d charts, the device list shows m0012: %t; want 12 charts and 12 values", strings.Count(page, "<svg"), strings.Contains(page, "m0012 <b>"))
	}
}
