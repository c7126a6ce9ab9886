package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// httpToken is the token of these tests' http.token_file.
const httpToken = "s3cret-token-0123"

// httpTry is one HTTP request of a test: from a client, with a method,
// path, bearer token, session cookie and login form, each when set.
type httpTry struct {
	method, path string
	bearer       string
	cookie       string
	form         url.Values
}

// do sends the request to the API at addr from client and returns the
// response, its body read and closed.
func (h httpTry) do(t *testing.T, client *http.Client, addr string) (*http.Response, error) {
	t.Helper()
	var body io.Reader
	if h.form != nil {
		body = strings.NewReader(h.form.Encode())
	}
	method := h.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, "http://"+addr+h.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if h.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if h.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+h.bearer)
	}
	if h.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "cairn_session", Value: h.cookie})
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, res.Body) //nolint:errcheck // only the status and headers matter
	res.Body.Close()
	return res, nil
}

// TestRun_HTTPFailedAuthLimit: from one address, wrong bearer tokens,
// made-up session cookies and wrong tokens in the login form are each
// refused failBurst times, then answered 429 with Retry-After, the right
// token too; a client at another address is served throughout.
func TestRun_HTTPFailedAuthLimit(t *testing.T) {
	token := writeFile(t, t.TempDir(), "token", []byte(httpToken+"\n"), 0o600)
	c := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), localConfig+"  token_file: "+token+"\n"))
	good := testkit.HTTPClientFrom("127.0.0.1")
	const burst = 10 // failed authentications an address may make at once
	for i, wrong := range []httpTry{
		{path: "/v1/status", bearer: "guess-0000000000"},
		{path: "/?part=health", cookie: strings.Repeat("0", 64)},
		{method: http.MethodPost, path: "/login", form: url.Values{"token": {"guess-0000000000"}}},
	} {
		name := "bearer token"
		switch {
		case wrong.cookie != "":
			name = "session cookie"
		case wrong.form != nil:
			name = "login form"
		}
		from := testkit.HTTPClientFrom(fmt.Sprintf("127.0.0.%d", 2+i))
		codes := map[int]int{}
		start := time.Now()
		var last *http.Response
		for range 3 * burst {
			res, err := wrong.do(t, from, c.http)
			if err != nil {
				t.Fatal(err)
			}
			codes[res.StatusCode]++
			last = res
		}
		// The limit gives one more try a second after the burst.
		most := burst + 1 + int(time.Since(start)/time.Second)
		if n := codes[http.StatusUnauthorized]; n < burst || n > most || codes[http.StatusTooManyRequests] == 0 {
			t.Errorf("%s: %d wrong attempts in %s: %v; want %d to %d refused (401), the rest 429", name, 3*burst, time.Since(start).Round(time.Millisecond), codes, burst, most)
		}
		if s, err := strconv.Atoi(last.Header.Get("Retry-After")); last.StatusCode != http.StatusTooManyRequests || err != nil || s < 1 {
			t.Errorf("%s: the last attempt: %d, Retry-After %q; want 429 with a number of seconds", name, last.StatusCode, last.Header.Get("Retry-After"))
		}
		if res, err := (httpTry{path: "/v1/status", bearer: httpToken}).do(t, from, c.http); err != nil || res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: the right token from the address over the limit: %v %v, want 429", name, res.StatusCode, err)
		}
		if res, err := (httpTry{path: "/v1/status", bearer: httpToken}).do(t, good, c.http); err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("%s: the right token from another address: %v %v, want 200", name, res.StatusCode, err)
		}
	}
	// The refusals are counted apart.
	code, body, err := (&apiClient{base: "http://" + c.http, c: authorized(httpToken)}).fetch("/metrics")
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), `cairn_http_refused_total{reason="too_many_failures"}`) {
		t.Errorf("/metrics: %d %v, want cairn_http_refused_total{reason=\"too_many_failures\"}", code, err)
	}
}

// authorized returns a client from 127.0.0.1 that sends the bearer token.
func authorized(token string) *http.Client {
	c := testkit.HTTPClientFrom("127.0.0.1")
	c.Transport = bearerTransport{token: token, next: c.Transport}
	return c
}

// bearerTransport adds a bearer token to each request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestRun_HTTPLoginFloodSparesQueries: while clients at four addresses
// flood the gateway with wrong logins, wrong bearer tokens and made-up
// session cookies, a client with the token makes queries within
// http.query_rate, and every one of them is answered.
func TestRun_HTTPLoginFloodSparesQueries(t *testing.T) {
	token := writeFile(t, t.TempDir(), "token", []byte(httpToken+"\n"), 0o600)
	c := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), localConfig+"  token_file: "+token+"\n  query_rate: 50\n"))
	var flood atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, try := range []httpTry{
		{method: http.MethodPost, path: "/login", form: url.Values{"token": {"x"}}},
		{method: http.MethodPost, path: "/login", form: url.Values{"token": {"x"}}},
		{path: "/v1/devices", bearer: "x"},
		{path: "/?part=charts", cookie: "x"},
	} {
		from := testkit.HTTPClientFrom(fmt.Sprintf("127.0.0.%d", 2+i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := try.do(t, from, c.http); err == nil {
					flood.Add(1)
				}
			}
		}()
	}
	defer wg.Wait()
	defer close(stop)
	waitUntil(t, startTimeout, "the flood under way", func() (bool, string) {
		n := flood.Load()
		return n >= 200, fmt.Sprintf("%d requests", n)
	})

	// 40 queries in a burst of 50 (query_rate 50): none over the limit
	// unless the flood took from it.
	api := authorized(httpToken)
	before := flood.Load()
	codes := map[int]int{}
	for range 40 {
		res, err := (httpTry{path: "/v1/devices"}).do(t, api, c.http)
		if err != nil {
			t.Fatal(err)
		}
		codes[res.StatusCode]++
	}
	during := flood.Load() - before
	if codes[http.StatusOK] != 40 {
		t.Errorf("40 queries with the token during the flood: %v, want 40 answered (200)", codes)
	}
	if during < 40 {
		t.Errorf("the flood made only %d requests during the queries, want at least 40 for the test to tell", during)
	}
	t.Logf("flood: %d requests during the 40 queries", during)
}

// TestRun_HTTPShortToken: a token file of a few characters stops
// check-config and run with the configuration's exit status, naming the
// file, the key and the length wanted.
func TestRun_HTTPShortToken(t *testing.T) {
	bin := cairnBinary.get(t)
	token := writeFile(t, t.TempDir(), "token", []byte("abc\n"), 0o600)
	cfg := writeConfig(t, t.TempDir(), localConfig+"  token_file: "+token+"\n")
	for _, cmd := range []string{"check-config", "run"} {
		// A run that starts is stopped when startTimeout is up.
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		out, err := exec.CommandContext(ctx, bin, cmd, "-config", cfg).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
			t.Errorf("cairn %s with a 3-character token: %v, want exit status %d\n%s", cmd, err, exitConfig, out)
		}
		want := cfg + ": http.token_file: " + token + " holds a token of 3 characters, too short to be secret: it must have at least 16"
		if !strings.Contains(string(out), want) {
			t.Errorf("cairn %s: output %q does not contain %q", cmd, out, want)
		}
	}
	// Off loopback without a token: refused the same way.
	open := writeConfig(t, t.TempDir(), "http:\n  listen: \"0.0.0.0:8080\"\n")
	out, err := exec.Command(bin, "check-config", "-config", open).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitConfig || !strings.Contains(string(out), "http.listen: 0.0.0.0:8080 is not loopback") {
		t.Errorf("check-config with http.listen 0.0.0.0:8080 and no token: %v, want exit status %d naming http.listen\n%s", err, exitConfig, out)
	}
}

// TestRun_HTTPHostCheck: without a token, the API answers only requests
// for a loopback name or one of http.allowed_hosts (what stops a
// DNS-rebinding page from reading it), and tells others why with 421.
func TestRun_HTTPHostCheck(t *testing.T) {
	client := testkit.HTTPClientFrom("127.0.0.1")
	check := func(addr string, hosts map[string]int) {
		t.Helper()
		for host, want := range hosts {
			for _, path := range []string{"/v1/status", "/", "/v1/devices"} {
				req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != want {
					t.Errorf("GET %s with Host %s: %d, want %d", path, host, res.StatusCode, want)
				}
				if want == 421 && !strings.Contains(string(body), "http.allowed_hosts") {
					t.Errorf("GET %s with Host %s: %s, want a message naming http.allowed_hosts", path, host, body)
				}
			}
		}
	}
	d := startDaemon(t, writeConfig(t, t.TempDir(), localConfig))
	_, port, _ := strings.Cut(d.http, ":")
	check(d.http, map[string]int{
		"127.0.0.1:" + port:    200,
		"localhost:" + port:    200,
		"[::1]:" + port:        200,
		"evil.example:" + port: 421,
		"rebind.evil.example":  421,
		"gateway.lan:" + port:  421,
	})
	d = startDaemon(t, writeConfig(t, t.TempDir(), localConfig+"  allowed_hosts: [gateway.lan]\n"))
	_, port, _ = strings.Cut(d.http, ":")
	check(d.http, map[string]int{
		"localhost:" + port:    200,
		"gateway.lan:" + port:  200,
		"evil.example:" + port: 421,
	})
	// Off loopback, the API is open without a token only when the
	// configuration says so, and names the hosts.
	if _, err := ParseConfig(strings.NewReader("http:\n  listen: \"0.0.0.0:8080\"\n  allow_anonymous: true\n  allowed_hosts: [gateway.lan, 192.168.1.20]\n")); err != nil {
		t.Errorf("allow_anonymous with allowed_hosts: %v", err)
	}
}

// TestRun_DashboardRateLimited: the dashboard and its parts take from
// http.query_rate like the API.
func TestRun_DashboardRateLimited(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), localConfig+"  query_rate: 2\n"))
	client := testkit.HTTPClientFrom("127.0.0.1")
	codes := map[int]int{}
	for _, path := range []string{"/", "/?part=health", "/?part=devices", "/?part=charts", "/", "/?part=health", "/?part=devices", "/?part=charts"} {
		res, err := (httpTry{path: path}).do(t, client, d.http)
		if err != nil {
			t.Fatal(err)
		}
		codes[res.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] < 4 {
		t.Errorf("8 page requests at once with query_rate 2: %v, want at least 4 refused (429)", codes)
	}
}
