package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
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
