package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// GuardOptions configure NewGuard.
type GuardOptions struct {
	// Token, when set, must come with every request but GET /healthz as
	// "Authorization: Bearer TOKEN", or with the cookie of a session
	// started by POST /login with the token (the dashboard's login form,
	// which GET / answers without either). Failed authentications are
	// limited per client address (failBurst, then one per failEvery).
	Token []byte
	// AllowedHosts are the host names (without port) that requests may
	// name in their Host header besides the loopback ones (localhost,
	// 127.0.0.1, ::1). The Host is checked without a Token, where it is
	// what stops a DNS-rebinding page, and with one when AllowedHosts is
	// not empty.
	AllowedHosts []string
	// QueryRate caps the requests per second to the dashboard (GET /,
	// its parts) and the query endpoints (/v1/devices…) from all
	// clients together, with a burst of one second's worth; 0 for no
	// limit. Requests that fail to authenticate do not take from it.
	QueryRate float64
	Registry  *Registry
	// Logger logs each client address that goes over its limit of
	// failed authentications, once each time; nil logs nothing.
	Logger *slog.Logger
}

// Limits on a request's size. Besides POST /login (its form, at most
// maxLoginBody), the API has GET endpoints only: a request never needs a
// body, and a query string of 2 KiB is plenty.
const (
	maxRequestBody  = 0
	maxRequestQuery = 2 << 10
)

// Guard wraps the API: Host check, bearer token or login session with a
// limit on failures per client address, request size and query rate
// limits, and a few response headers. It answers the dashboard's login
// itself (POST /login, POST /logout), since it holds the token and the
// sessions. It counts what it refuses.
type Guard struct {
	next  http.Handler
	token [sha256.Size]byte // SHA-256 of the token: compared in constant time
	check bool

	hosts     map[string]bool // AllowedHosts, lower case
	checkHost bool            // whether the Host header is checked

	limit    *rate.Limiter // http.query_rate, with a burst of one second's worth; nil when none
	failures failures      // failed authentications by client address

	sessions sessions // the dashboard's logins
	csp      string   // the login page's Content-Security-Policy

	refused *CounterVec
	log     *slog.Logger
}

// NewGuard returns next wrapped in a Guard, whose counters are
// registered with opts.Registry.
func NewGuard(next http.Handler, opts GuardOptions) (*Guard, error) {
	var limit *rate.Limiter
	if opts.QueryRate > 0 {
		// A burst of one second, capped so that an int holds it on any board.
		limit = rate.NewLimiter(rate.Limit(opts.QueryRate), int(min(math.Ceil(opts.QueryRate), 1<<30)))
	}
	g := &Guard{
		limit:     limit,
		next:      next,
		check:     len(opts.Token) > 0,
		token:     sha256.Sum256(opts.Token),
		hosts:     make(map[string]bool, len(opts.AllowedHosts)),
		checkHost: len(opts.Token) == 0 || len(opts.AllowedHosts) > 0,
		log:       opts.Logger,
		refused: NewCounterVec(NewDesc("cairn_http_refused_total",
			"HTTP requests refused, by reason (unauthorized, too_many_failures, wrong_host, too_large, rate_limited).", "reason")),
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	for _, h := range opts.AllowedHosts {
		g.hosts[normalHost(h)] = true
	}
	if err := opts.Registry.Register(g.refused); err != nil {
		return nil, err
	}
	csp, err := contentSecurityPolicy()
	if err != nil {
		return nil, err
	}
	g.csp = csp
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
		g.next.ServeHTTP(w, r)
		return
	}
	if g.checkHost && !g.hostAllowed(r.Host) {
		g.refused.Inc("wrong_host")
		writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": fmt.Sprintf(
			"host %q is not served here: cairn answers only localhost, 127.0.0.1, [::1] and the names in http.allowed_hosts", r.Host)})
		return
	}
	if r.Method == http.MethodPost && (r.URL.Path == "/login" || r.URL.Path == "/logout") {
		switch {
		case !g.check: // nothing to log in to: the page is open
			http.Redirect(w, r, "/", http.StatusSeeOther)
		case r.URL.Path == "/login":
			g.login(w, r)
		default:
			g.logout(w, r)
		}
		return
	}
	if g.check && !g.authenticate(w, r) {
		return
	}
	if r.ContentLength != 0 || len(r.URL.RawQuery) > maxRequestQuery {
		g.refused.Inc("too_large")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "request body or query string too large"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	if (r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/v1/devices")) && g.limited(w) {
		return
	}
	g.next.ServeHTTP(w, r)
}

// authenticate reports whether r carries the bearer token or the cookie
// of a live session; when it does not, it has answered. A request with
// neither is answered 401, or the login form for a browser loading the
// page; a wrong token or a dead session counts as a failure of the
// client's address, and an address with too many of them lately is
// answered 429 whatever it carries.
func (g *Guard) authenticate(w http.ResponseWriter, r *http.Request) bool {
	pageLoad := r.URL.Path == "/" && r.Method == http.MethodGet && !r.URL.Query().Has("part")
	bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	cookie, err := r.Cookie(dashboard.SessionCookie)
	hasCookie := err == nil
	if hasBearer || hasCookie {
		key, now := clientKey(r), time.Now()
		if wait := g.failures.wait(key, now); wait > 0 {
			g.tooManyFailures(w, wait, r.URL.RequestURI(), pageLoad)
			return false
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(bearer)))
		if hasBearer && subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1 {
			return true
		}
		if hasCookie {
			if exp, ok := g.sessions.use(cookie.Value, now); ok {
				if pageLoad {
					// The cookie lasts as long as the session does.
					g.setSessionCookie(w, r, cookie.Value, exp)
				}
				return true
			}
			clearSessionCookie(w, r) // a dead session: the browser may forget it
		}
		g.failed(r, key, now)
		g.refused.Inc("unauthorized")
	}
	if pageLoad {
		// A browser: the login form, which comes back here.
		g.writeLogin(w, http.StatusOK, r.URL.RequestURI(), "")
		return false
	}
	if !hasBearer && !hasCookie {
		g.refused.Inc("unauthorized")
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a bearer token is required (http.token_file)"})
	return false
}

// failed records a failed authentication of r's client address key, and
// logs the address when that was its last try: a guess at the token.
func (g *Guard) failed(r *http.Request, key netip.Addr, now time.Time) {
	if g.failures.fail(key, now) {
		g.log.Warn("too many failed authentications: the client's requests are answered 429 until it waits",
			"remote", r.RemoteAddr, "path", r.URL.Path, "failures", failBurst)
	}
}

// tooManyFailures answers 429 to a client address that failed to
// authenticate too often lately, and may try again after wait: the login
// form with a message for a browser (form), JSON otherwise.
func (g *Guard) tooManyFailures(w http.ResponseWriter, wait time.Duration, next string, form bool) {
	g.refused.Inc("too_many_failures")
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	msg := fmt.Sprintf("Too many failed sign-ins from your address: try again in %d s.", secs)
	if form {
		g.writeLogin(w, http.StatusTooManyRequests, next, msg)
		return
	}
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": fmt.Sprintf(
		"too many failed authentications from your address; try again in %d s", secs)})
}

// limited takes a token of the query rate limit and reports whether the
// request is over it, in which case it has answered 429.
func (g *Guard) limited(w http.ResponseWriter) bool {
	if g.limit == nil || g.limit.Allow() { // a refused request takes no token
		return false
	}
	g.refused.Inc("rate_limited")
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many requests; try again in a second"})
	return true
}

// hostAllowed reports whether host, a request's Host header, names this
// gateway: a loopback name or address, or one of AllowedHosts, with or
// without a port.
func (g *Guard) hostAllowed(host string) bool {
	name := normalHost(host)
	if name == "" {
		return false
	}
	if name == "localhost" || g.hosts[name] {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.IsLoopback()
}

// normalHost returns the name of a Host header: without port or
// brackets, in lower case, without a final dot.
func normalHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
