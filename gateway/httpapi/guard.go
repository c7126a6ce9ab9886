package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"math"
	"net/http"
	"strings"

	"golang.org/x/time/rate"

	"github.com/prometheus/client_golang/prometheus"
)

// GuardOptions configure NewGuard.
type GuardOptions struct {
	// Token, when set, must come with every request but GET /healthz as
	// "Authorization: Bearer TOKEN", or with the cookie of a session
	// started by POST /login with the token (the dashboard's login form,
	// which GET / answers without either).
	Token []byte
	// QueryRate caps the requests per second to the query endpoints
	// (/v1/devices…) and the login attempts (POST /login) from all
	// clients together, with a burst of one second's worth; 0 for no
	// limit.
	QueryRate float64
	Registry  prometheus.Registerer
}

// Limits on a request's size. Besides POST /login (its form, at most
// maxLoginBody), the API has GET endpoints only: a request never needs a
// body, and a query string of 2 KiB is plenty.
const (
	maxRequestBody  = 0
	maxRequestQuery = 2 << 10
)

// Guard wraps the API: bearer token or login session, request size and
// query rate limits, and a few response headers. It answers the
// dashboard's login itself (POST /login, POST /logout), since it holds
// the token and the sessions. It counts what it refuses.
type Guard struct {
	next  http.Handler
	token [sha256.Size]byte // SHA-256 of the token: compared in constant time
	check bool

	limit  *rate.Limiter // http.query_rate, with a burst of one second's worth; nil when none
	logins *rate.Limiter // login attempts, whatever http.query_rate says

	sessions sessions // the dashboard's logins
	csp      string   // the login page's Content-Security-Policy

	refused *prometheus.CounterVec
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
		limit:  limit,
		logins: rate.NewLimiter(loginRate, loginBurst),
		next:   next,
		check:  len(opts.Token) > 0,
		token:  sha256.Sum256(opts.Token),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_http_refused_total",
			Help: "HTTP requests refused, by reason (unauthorized, too_large, rate_limited).",
		}, []string{"reason"}),
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
	pageLoad := r.URL.Path == "/" && r.Method == http.MethodGet && !r.URL.Query().Has("part")
	if g.check && !g.authorized(r) {
		switch c := g.session(r); {
		case c != nil && pageLoad:
			// The cookie lasts as long as the session does: from its
			// last use.
			g.setSessionCookie(w, r, c.Value)
		case c != nil:
		case pageLoad:
			// A browser: the login form, which comes back here.
			g.writeLogin(w, http.StatusOK, r.URL.RequestURI(), "")
			return
		default:
			g.refused.WithLabelValues("unauthorized").Inc()
			h.Set("WWW-Authenticate", `Bearer realm="cairn"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a bearer token is required (http.token_file)"})
			return
		}
	}
	if r.ContentLength != 0 || len(r.URL.RawQuery) > maxRequestQuery {
		g.refused.WithLabelValues("too_large").Inc()
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "request body or query string too large"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	if strings.HasPrefix(r.URL.Path, "/v1/devices") && g.limited(w) {
		return
	}
	g.next.ServeHTTP(w, r)
}

// Login attempts are limited on their own as well, so that a short token
// cannot be guessed at the query rate, or at all with http.query_rate: 0.
const (
	loginRate  = rate.Limit(1) // attempts a second
	loginBurst = 10
)

// limited takes a token of the query rate limit and reports whether the
// request is over it, in which case it has answered 429.
func (g *Guard) limited(w http.ResponseWriter) bool {
	if g.limit == nil || g.limit.Allow() { // a refused request takes no token
		return false
	}
	g.tooMany(w)
	return true
}

// tooMany answers 429 and counts it.
func (g *Guard) tooMany(w http.ResponseWriter) {
	g.refused.WithLabelValues("rate_limited").Inc()
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many requests; try again in a second"})
}

// authorized reports whether the request carries the bearer token.
func (g *Guard) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}
