package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// guarded is a testAPI behind a Guard with a token.
type guarded struct {
	*testAPI
	g   *Guard
	reg *Registry
	srv *httptest.Server
}

func newGuarded(t *testing.T, token string, rate float64) *guarded {
	t.Helper()
	a := newTestAPI(t)
	reg := NewRegistry()
	g, err := NewGuard(a.api, GuardOptions{Token: []byte(token), QueryRate: rate, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return &guarded{testAPI: a, g: g, reg: reg, srv: srv}
}

// client returns an HTTP client that keeps cookies and does not follow
// redirects.
func (g *guarded) client(t *testing.T) *http.Client {
	t.Helper()
	jar := &cookieJar{}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// cookieJar keeps the cookies of one host, as a browser would.
type cookieJar struct{ cs []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	for _, c := range cs {
		kept := j.cs[:0]
		for _, o := range j.cs {
			if o.Name != c.Name {
				kept = append(kept, o)
			}
		}
		j.cs = kept
		if c.MaxAge >= 0 {
			j.cs = append(j.cs, c)
		}
	}
}
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie { return j.cs }

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestGuard_Login(t *testing.T) {
	g := newGuarded(t, "s3cret", 0)
	g.storeSeries(t, "kitchen", time.Now(), "temp")
	c := g.client(t)
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(g.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return res, readBody(t, res)
	}
	post := func(path string, form url.Values) (*http.Response, string) {
		t.Helper()
		res, err := c.PostForm(g.srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		return res, readBody(t, res)
	}

	// Without a session: the page is the login form, everything else 401.
	res, body := get("/?device=kitchen")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `value="/?device=kitchen"`) {
		t.Fatalf("GET / without a session: %d %s, want the login form", res.StatusCode, body)
	}
	if res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("login form headers: %v", res.Header)
	}
	for _, path := range []string{"/?part=charts&device=kitchen", "/v1/devices", "/v1/status"} {
		if res, body := get(path); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s without a session: %d %s, want 401 JSON", path, res.StatusCode, body)
		}
	}

	// A wrong token: the form again, 401, counted.
	before := g.refused(t, "unauthorized")
	res, body = post("/login", url.Values{"token": {"guess"}, "next": {"/?device=kitchen"}})
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not the token") || !strings.Contains(body, `name="token"`) {
		t.Errorf("wrong token: %d %s, want 401 and the form", res.StatusCode, body)
	}
	if got := g.refused(t, "unauthorized") - before; got != 1 {
		t.Errorf("wrong token: counted %v times, want 1", got)
	}
	if len(c.Jar.(*cookieJar).cs) != 0 {
		t.Error("wrong token: a cookie was set")
	}

	// The right token: a session cookie and a redirect to a local path only.
	res, _ = post("/login", url.Values{"token": {"s3cret"}, "next": {"//evil.example/"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Errorf("login: %d to %q, want 303 to /", res.StatusCode, res.Header.Get("Location"))
	}
	res, _ = post("/login", url.Values{"token": {"s3cret"}, "next": {"/?device=kitchen"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/?device=kitchen" {
		t.Errorf("login: %d to %q, want 303 to /?device=kitchen", res.StatusCode, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == dashboard.SessionCookie {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure || len(cookie.Value) != 64 || strings.Contains(cookie.Value, "s3cret") {
		t.Fatalf("session cookie: %+v", cookie)
	}
	res, body = get("/?device=kitchen")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Charts of kitchen") || strings.Count(body, "<svg") != 1 {
		t.Errorf("page with a session: %d, want the page with a chart", res.StatusCode)
	}
	// Loading the page sets the cookie again, to last as long as the
	// session, which the use extended; parts and the API do not.
	if got := res.Cookies(); len(got) != 1 || got[0].Value != cookie.Value || got[0].MaxAge > 30*24*3600 || got[0].MaxAge < 30*24*3600-5 ||
		!got[0].HttpOnly || got[0].SameSite != http.SameSiteStrictMode || got[0].Path != "/" {
		t.Errorf("page with a session set %+v, want the session cookie again for 30 days", got)
	}
	for _, path := range []string{"/?part=charts&device=kitchen", "/v1/devices", "/v1/devices/kitchen/latest"} {
		res, body := get(path)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a session: %d %s", path, res.StatusCode, body)
		}
		if got := res.Cookies(); len(got) != 0 {
			t.Errorf("GET %s with a session set %+v, want no cookie", path, got)
		}
	}
	// The bearer token still works without a cookie; a made-up cookie does not.
	req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/v1/devices", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("bearer token: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	req, _ = http.NewRequest(http.MethodGet, g.srv.URL+"/v1/devices", nil)
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookie, Value: strings.Repeat("0", 64)})
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("made-up session: %v %v, want 401", res, err)
	} else {
		res.Body.Close()
	}

	// Logging out ends the session.
	if res, _ := post("/logout", nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d, want 303", res.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, g.srv.URL+"/v1/devices", nil)
	req.AddCookie(cookie)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %v %v, want 401", res, err)
	} else {
		res.Body.Close()
	}
}

// Login attempts do not take from the query rate: a client over it may
// still log in. A login form larger than a few KiB is refused; other
// requests still may not have a body.
func TestGuard_LoginLimits(t *testing.T) {
	g := newGuarded(t, "s3cret", 1)
	c := g.client(t)
	req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/v1/devices", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	codes := map[int]int{}
	for range 3 {
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, res)
		codes[res.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("3 queries in a burst of 1: %v, want some 429", codes)
	}
	res, err := c.PostForm(g.srv.URL+"/login", url.Values{"token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("login over the query rate: %d, want 303", res.StatusCode)
	}

	g = newGuarded(t, "s3cret", 0)
	res, err = g.client(t).PostForm(g.srv.URL+"/login", url.Values{"token": {strings.Repeat("x", 8<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a login form of 8 KiB: %d, want 413", res.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, g.srv.URL+"/v1/devices", strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer s3cret")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("GET with a body: %v %v, want 413", res, err)
	} else {
		res.Body.Close()
	}
}

func TestSessions_Bounded(t *testing.T) {
	var s sessions
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := s.create(now)
	ids := []string{first}
	for i := 1; i < maxSessions; i++ {
		ids = append(ids, s.create(now.Add(time.Duration(i)*time.Second)))
	}
	// Using the first makes it the newest: the second is dropped next.
	if !s.valid(first, now.Add(time.Hour)) {
		t.Fatal("first session not valid")
	}
	s.create(now.Add(2 * time.Hour))
	if len(s.ids) != maxSessions || s.valid(ids[1], now.Add(2*time.Hour)) || !s.valid(first, now.Add(2*time.Hour)) {
		t.Errorf("after %d+1 sessions: %d kept, second kept %v", maxSessions, len(s.ids), s.valid(ids[1], now))
	}
	// A session not used for sessionIdle has expired.
	if s.valid(first, now.Add(2*time.Hour+sessionIdle)) {
		t.Error("an expired session is valid")
	}
}

// refused reads cairn_http_refused_total{reason}.
func (g *guarded) refused(t *testing.T, reason string) float64 {
	t.Helper()
	body, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	prefix := `cairn_http_refused_total{reason="` + reason + `"} `
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// Without a token there is nothing to log in to: the page is open, and a
// login form posted anyway leads to it.
func TestGuard_NoToken(t *testing.T) {
	g := newGuarded(t, "", 0)
	c := g.client(t)
	res, err := c.Get(g.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, res); res.StatusCode != http.StatusOK || strings.Contains(body, `name="token"`) || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET / without a token: %d %v, want the page", res.StatusCode, res.Header)
	}
	res, err = c.PostForm(g.srv.URL+"/login", url.Values{"token": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" || len(res.Cookies()) != 0 {
		t.Errorf("POST /login without a token: %d to %q, cookies %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
}

// valid reports whether id is a live session, and extends it.
func (s *sessions) valid(id string, now time.Time) bool {
	_, ok := s.use(id, now)
	return ok
}
