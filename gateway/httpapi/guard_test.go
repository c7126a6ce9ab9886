package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway/dashboard"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// TestGuard_FailedAuthLimit: wrong bearer tokens, dead session cookies
// and wrong tokens in the login form each lock their client's address
// out after failBurst, with 429 and Retry-After, the right token too;
// another address is served as before.
func TestGuard_FailedAuthLimit(t *testing.T) {
	g := newGuarded(t, "s3cret", 0)
	base, _ := url.Parse(g.srv.URL)
	_, port, _ := strings.Cut(base.Host, ":")
	for i, c := range []struct {
		name  string
		wrong func() *http.Request
	}{
		{"bearer", func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, "/v1/status", nil)
			req.Header.Set("Authorization", "Bearer guess")
			return req
		}},
		{"cookie", func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, "/?part=health", nil)
			req.AddCookie(&http.Cookie{Name: dashboard.SessionCookie, Value: strings.Repeat("0", 64)})
			return req
		}},
		{"login form", func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, "/login", strings.NewReader("token=guess"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			from := testkit.HTTPClientFrom(fmt.Sprintf("127.0.0.%d", 10+i))
			do := func(cl *http.Client, req *http.Request) *http.Response {
				t.Helper()
				req.URL.Scheme, req.URL.Host = "http", "127.0.0.1:"+port
				res, err := cl.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				readBody(t, res)
				return res
			}
			right := func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, "/v1/status", nil)
				req.Header.Set("Authorization", "Bearer s3cret")
				return req
			}
			codes := map[int]int{}
			var last *http.Response
			for range failBurst + 3 {
				last = do(from, c.wrong())
				codes[last.StatusCode]++
			}
			// failBurst refused, and one more for each second the loop took.
			if codes[http.StatusUnauthorized] < failBurst || codes[http.StatusUnauthorized] > failBurst+2 || codes[http.StatusTooManyRequests] == 0 {
				t.Errorf("%d wrong attempts: %v, want %d refused (401), then 429", failBurst+3, codes, failBurst)
			}
			if s, err := strconv.Atoi(last.Header.Get("Retry-After")); last.StatusCode != http.StatusTooManyRequests || err != nil || s < 1 {
				t.Errorf("over the limit: %d, Retry-After %q, want 429 and a number of seconds", last.StatusCode, last.Header.Get("Retry-After"))
			}
			if res := do(from, right()); res.StatusCode != http.StatusTooManyRequests {
				t.Errorf("the right token from an address over the limit: %d, want 429", res.StatusCode)
			}
			if res := do(testkit.HTTPClientFrom("127.0.0.1"), right()); res.StatusCode != http.StatusOK {
				t.Errorf("the right token from another address: %d, want 200", res.StatusCode)
			}
		})
	}
	if got := g.refused(t, "too_many_failures"); got < 3 {
		t.Errorf("too_many_failures counted %v, want at least 3", got)
	}
}

// TestFailures_Bounded: however many addresses fail, the table keeps
// maxFailAddrs of them at most; beyond, they share one allowance, and
// the table makes room once its addresses have paid for their failures.
func TestFailures_Bounded(t *testing.T) {
	var f failures
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range maxFailAddrs {
		f.fail(addr(i), now)
	}
	if len(f.addrs) != maxFailAddrs {
		t.Fatalf("%d addresses failed: %d kept, want all", maxFailAddrs, len(f.addrs))
	}
	// Beyond the table, new addresses share failBurst failures.
	for i := range failBurst {
		if w := f.wait(addr(maxFailAddrs+i), now); w != 0 {
			t.Fatalf("new address %d beyond the table: wait %s, want none yet", i, w)
		}
		f.fail(addr(maxFailAddrs+i), now)
	}
	if w := f.wait(addr(2*maxFailAddrs), now); w <= 0 {
		t.Errorf("after %d failures beyond the table, a new address may try again at once; want a wait", failBurst)
	}
	if len(f.addrs) != maxFailAddrs {
		t.Errorf("table holds %d addresses, want %d at most", len(f.addrs), maxFailAddrs)
	}
	// An address in the table keeps its own allowance.
	if w := f.wait(addr(0), now); w != 0 {
		t.Errorf("an address of the table with one failure: wait %s, want none", w)
	}
	// Once the table's buckets are full again, they make room.
	later := now.Add(failBurst * failEvery)
	f.fail(addr(3*maxFailAddrs), later)
	if len(f.addrs) != 1 {
		t.Errorf("after the table's addresses paid: %d kept, want only the new one", len(f.addrs))
	}
}

// TestFailures_IPv6ByPrefix: the addresses of one IPv6 /64 share their
// failures; an IPv4-mapped address is its IPv4 one.
func TestFailures_IPv6ByPrefix(t *testing.T) {
	key := func(remote string) netip.Addr {
		return clientKey(&http.Request{RemoteAddr: remote})
	}
	if a, b := key("[2001:db8:1:2::1]:5000"), key("[2001:db8:1:2:ffff::9]:6000"); a != b {
		t.Errorf("one /64: keys %v and %v, want the same", a, b)
	}
	if a, b := key("[2001:db8:1:2::1]:5000"), key("[2001:db8:1:3::1]:5000"); a == b {
		t.Errorf("two /64s: the same key %v", a)
	}
	if a, b := key("[::ffff:192.0.2.7]:1"), key("192.0.2.7:2"); a != b {
		t.Errorf("IPv4-mapped: %v, want %v", a, b)
	}
}

// TestGuard_Host: without a token, only loopback names and
// allowed_hosts are served, with or without a port; with a token, any
// Host is, unless allowed_hosts is set.
func TestGuard_Host(t *testing.T) {
	for _, c := range []struct {
		token   string
		allowed []string
		host    string
		want    int
	}{
		{"", nil, "localhost", 200},
		{"", nil, "localhost:8080", 200},
		{"", nil, "LOCALHOST:8080", 200},
		{"", nil, "127.0.0.1:8080", 200},
		{"", nil, "127.0.0.1", 200},
		{"", nil, "[::1]:8080", 200},
		{"", nil, "[::1]", 200},
		{"", nil, "evil.example", 421},
		{"", nil, "evil.example:8080", 421},
		{"", nil, "localhost.evil.example", 421},
		{"", nil, "192.168.1.20:8080", 421},
		{"", nil, "", 421},
		{"", []string{"gateway.lan", "192.168.1.20"}, "gateway.lan:8080", 200},
		{"", []string{"gateway.lan", "192.168.1.20"}, "Gateway.LAN.", 200},
		{"", []string{"gateway.lan", "192.168.1.20"}, "192.168.1.20:8080", 200},
		{"", []string{"gateway.lan"}, "evil.example", 421},
		{"", []string{"gateway.lan"}, "localhost:8080", 200},
		{"s3cret", nil, "evil.example", 200},
		{"s3cret", []string{"gateway.lan"}, "gateway.lan", 200},
		{"s3cret", []string{"gateway.lan"}, "evil.example", 421},
	} {
		a := newTestAPI(t)
		g, err := NewGuard(a.api, GuardOptions{Token: []byte(c.token), AllowedHosts: c.allowed, Registry: NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/v1/status", "/"} {
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
			req.Host = c.host
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Errorf("token %q, allowed %v, Host %q, GET %s: %d, want %d", c.token, c.allowed, c.host, path, rec.Code, c.want)
			}
			if c.want == 421 && !strings.Contains(rec.Body.String(), "http.allowed_hosts") {
				t.Errorf("Host %q: %s, want a message that names http.allowed_hosts", c.host, rec.Body)
			}
		}
		// /healthz says only that the process runs: any Host.
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/healthz", nil)
		req.Host = c.host
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("Host %q, GET /healthz: %d, want 200", c.host, rec.Code)
		}
	}
}

// TestGuard_PageRateLimited: the page and its parts take from the query
// rate like the API.
func TestGuard_PageRateLimited(t *testing.T) {
	g := newGuarded(t, "", 2)
	codes := map[int]int{}
	for _, path := range []string{"/", "/?part=health", "/?part=devices", "/?part=charts", "/", "/?part=health"} {
		res, err := g.client(t).Get(g.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, res)
		codes[res.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] < 2 {
		t.Errorf("6 page requests with query_rate 2: %v, want at least 2 refused (429)", codes)
	}
}

// TestSessions_AbsoluteLifetime: a session used every day still ends
// sessionMaxAge after its login.
func TestSessions_AbsoluteLifetime(t *testing.T) {
	var s sessions
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := s.create(now)
	var at time.Time
	for at = now; at.Before(now.Add(sessionMaxAge)); at = at.Add(24 * time.Hour) {
		exp, ok := s.use(id, at)
		if !ok {
			t.Fatalf("session used daily ended after %s, want %s", at.Sub(now), sessionMaxAge)
		}
		want := at.Add(sessionIdle)
		if end := now.Add(sessionMaxAge); end.Before(want) {
			want = end
		}
		if !exp.Equal(want) {
			t.Fatalf("after %s: expiry %s, want %s", at.Sub(now), exp, want)
		}
	}
	if s.valid(id, now.Add(sessionMaxAge)) {
		t.Errorf("session valid %s after its login, want ended", sessionMaxAge)
	}
}

// TestGuard_LogsAddressOverLimit: the address whose failed
// authentications reach the limit is logged once, not for each failure
// or each 429 after it.
func TestGuard_LogsAddressOverLimit(t *testing.T) {
	logged := testkit.NewLines()
	a := newTestAPI(t)
	g, err := NewGuard(a.api, GuardOptions{Token: []byte("s3cret-s3cret-s3cret"), Registry: NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	from := testkit.HTTPClientFrom("127.0.0.20")
	for range failBurst + 5 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer guess")
		res, err := from.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, res)
	}
	if n := len(logged.Matching("too many failed authentications")); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logged.String())
	}
	if !strings.Contains(logged.String(), "remote=127.0.0.20:") {
		t.Errorf("the log does not name the address:\n%s", logged.String())
	}
}

// TestFailures_LastTry: fail reports the failure that used an address's
// last try, and only that one.
func TestFailures_LastTry(t *testing.T) {
	var f failures
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := netip.MustParseAddr("192.0.2.7")
	for i := 1; i <= failBurst+2; i++ {
		if got, want := f.fail(key, now), i == failBurst; got != want {
			t.Errorf("failure %d: last try %v, want %v", i, got, want)
		}
	}
}
