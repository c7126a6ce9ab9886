package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPGuardOptions configure GuardHTTP.
type HTTPGuardOptions struct {
	// Token, when set, must come with every request but GET /healthz as
	// "Authorization: Bearer TOKEN".
	Token []byte
	// QueryRate caps the requests per second to the query endpoints
	// (/v1/devices…) from all clients together, with a burst of one
	// second's worth; 0 for no limit.
	QueryRate float64
	Registry  prometheus.Registerer
}

// Limits on a request's size. The API has GET endpoints only: a request
// never needs a body, and a query string of 2 KiB is plenty.
const (
	maxRequestBody  = 0
	maxRequestQuery = 2 << 10
)

// HTTPGuard wraps the API: bearer token, request size and query rate
// limits, and a few response headers. It counts what it refuses.
type HTTPGuard struct {
	next  http.Handler
	token [sha256.Size]byte // SHA-256 of the token: compared in constant time
	check bool

	mu     sync.Mutex // guards bucket
	bucket tokenBucket

	refused *prometheus.CounterVec
}

// GuardHTTP returns next wrapped in an HTTPGuard, whose counters are
// registered with opts.Registry.
func GuardHTTP(next http.Handler, opts HTTPGuardOptions) (*HTTPGuard, error) {
	g := &HTTPGuard{
		next:   next,
		check:  len(opts.Token) > 0,
		token:  sha256.Sum256(opts.Token),
		bucket: newTokenBucket(opts.QueryRate),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_http_refused_total",
			Help: "HTTP requests refused, by reason (unauthorized, too_large, rate_limited).",
		}, []string{"reason"}),
	}
	if err := opts.Registry.Register(g.refused); err != nil {
		return nil, err
	}
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *HTTPGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
		g.next.ServeHTTP(w, r)
		return
	}
	if g.check && !g.authorized(r) {
		g.refused.WithLabelValues("unauthorized").Inc()
		h.Set("WWW-Authenticate", `Bearer realm="cairn"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a bearer token is required (http.token_file)"})
		return
	}
	if r.ContentLength != 0 || len(r.URL.RawQuery) > maxRequestQuery {
		g.refused.WithLabelValues("too_large").Inc()
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "request body or query string too large"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	if strings.HasPrefix(r.URL.Path, "/v1/devices") {
		g.mu.Lock()
		wait := g.bucket.take(time.Now())
		if wait > 0 {
			g.bucket.tokens++ // refused: give the token back
		}
		g.mu.Unlock()
		if wait > 0 {
			g.refused.WithLabelValues("rate_limited").Inc()
			h.Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many queries; try again in a second"})
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// authorized reports whether the request carries the bearer token.
func (g *HTTPGuard) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}
