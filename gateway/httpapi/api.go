// Package httpapi is cairn's local HTTP API: health, status, the devices
// and their readings and aggregates, the Prometheus metrics, and the
// dashboard page (gateway/dashboard) filled in from them, behind a guard
// (Host check, bearer token or login session with failures limited per
// client address, request size, query rate). It reads the store and
// the counters of every part through the small interfaces below, which
// cmd/cairn fills with the real parts.
package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/uplink"
)

// Store is what the API asks of the store (a *buffer.Store): its size and
// series, and its queries, the newest reading of each series among them,
// and which series hold texts, with the texts they have held.
type Store interface {
	Stats() (buffer.Stats, error)
	HasDevice(device string) bool
	Devices(after string, limit int) ([]buffer.Device, bool)
	Readings(q buffer.Query) ([]buffer.Reading, error)
	Scan(q buffer.Query, fn func(buffer.Reading) bool) error
	StatsCover(device, metric string, from, to int64) (aggregate.Stats, buffer.Reads, error)
	StatsByLevel(device, metric string, level aggregate.Level, from, to int64) ([]buffer.StatsAt, buffer.Reads, error)
	StatesCover(device, metric string, from, to, now int64) (buffer.StatesAt, buffer.Reads, error)
	StatesByLevel(device, metric string, level aggregate.Level, from, to, now int64) ([]buffer.StatesAt, buffer.Reads, error)
	Unit(device, metric string) string
	Latest(devices ...string) ([]buffer.Reading, error)
	LatestAll() ([]buffer.Reading, error)
	LatestFunc(keep func(device, metric string) bool) ([]buffer.Reading, error)
	IsText(device, metric string) bool
	Texts(device, metric string) []string
}

// Writer is what the API reads of the group commit (a *buffer.Writer):
// its counters, its limits on series, and why ingest is paused.
type Writer interface {
	Stats() buffer.WriterStats
	SeriesLimits() (total, perDevice int)
	PausedReason() string
}

// Ingest is what the API reads of ingest (a *gateway.Ingester): its
// counters.
type Ingest interface {
	Stats() gateway.IngestStats
}

// Retention says what retention removed and why it may be paused (a
// *buffer.Retention).
type Retention interface {
	Status() (buffer.RetentionStatus, error)
}

// Uplink says how sending upstream goes (an *uplink.Uplink).
type Uplink interface {
	Status() uplink.Status
}

// Headroom says how much space the data directory's file system has free
// (a *buffer.Headroom).
type Headroom interface {
	Status() buffer.HeadroomStatus
}

// Clock is the gateway's clock (a *buffer.Clock): the time of queries'
// default bounds, and whether it is trusted.
type Clock interface {
	Now() time.Time
	Status() buffer.ClockStatus
}

// MQTTStatus says how the MQTT side is doing.
type MQTTStatus struct {
	Mode      string `json:"mode"` // "embedded" or "external"
	Address   string `json:"address"`
	Connected bool   `json:"connected"` // embedded: listening; external: connected and subscribed
	Clients   int64  `json:"clients"`
	// Refused counts what the embedded broker refused (connections,
	// publishes, subscriptions, limits), by reason; see gateway.Refusals.
	Refused         uint64            `json:"refused"`
	RefusedByReason map[string]uint64 `json:"refused_by_reason"`
	// LastError says why the external broker could not be reached or
	// refused cairn, at LastErrorAt, and FailedAttempts how many attempts
	// failed since the last connection; cleared once connected.
	LastError      string     `json:"last_error"`
	LastErrorAt    *time.Time `json:"last_error_at"`
	FailedAttempts int        `json:"failed_attempts"`
}

// Options configure the HTTP API. Store, Writer, Ingest, MQTT, Registry
// and Logger are required; the others are left nil where the gateway has
// no such part (no uplink: it works offline).
type Options struct {
	Store  Store
	Writer Writer
	Ingest Ingest
	MQTT   func() MQTTStatus
	// Uplinks are the upstreams, in the configuration's order; none
	// when the gateway works offline.
	Uplinks []Uplink
	// Retention, when set, is reported under "retention".
	Retention Retention
	// Headroom, when set, reports the free space under "store".
	Headroom Headroom
	// Clock, when set, is reported under "clock", and is the clock of
	// queries' default times.
	Clock Clock
	// MetricsReadings puts the newest reading of each series on /metrics
	// as the gauge cairn_reading{device,metric,unit}, as many as the
	// Writer's limit on series (Writer.SeriesLimits) at most.
	MetricsReadings bool
	Version         string
	Started         time.Time
	Registry        *Registry
	Logger          *slog.Logger
}

// now reads the gateway's clock.
func (a *API) now() time.Time {
	if a.opts.Clock != nil {
		return a.opts.Clock.Now()
	}
	return time.Now()
}

// API serves the local HTTP status and query endpoints.
type API struct {
	opts Options
	mux  *http.ServeMux
	csp  string // the dashboard's Content-Security-Policy
	rate rateSampler
}

// New creates the API and registers its metrics with opts.Registry.
func New(opts Options) (*API, error) {
	csp, err := contentSecurityPolicy()
	if err != nil {
		return nil, err
	}
	a := &API{opts: opts, mux: http.NewServeMux(), csp: csp}
	a.rate.rate(opts.Started, 0)
	if err := opts.Registry.Register(newCollector(opts)); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	a.mux.HandleFunc("GET /{$}", a.page)
	a.mux.HandleFunc("GET /favicon.ico", a.favicon)
	a.mux.HandleFunc("GET /healthz", a.healthz)
	a.mux.HandleFunc("GET /readyz", a.readyz)
	a.mux.HandleFunc("GET /v1/status", a.status)
	a.mux.HandleFunc("GET /v1/devices", a.devices)
	a.mux.HandleFunc("GET /v1/devices/{device}/readings", a.readings)
	a.mux.HandleFunc("GET /v1/devices/{device}/stats", a.stats)
	a.mux.HandleFunc("GET /v1/devices/{device}/latest", a.latest)
	a.mux.Handle("GET /metrics", metricsHandler(opts.Registry))
	return a, nil
}

// ServeHTTP implements http.Handler. A request that no route takes gets
// the router's 404 or 405 (with its Allow header) as JSON, like every
// other error of the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := a.mux.Handler(r)
	if pattern != "" {
		a.mux.ServeHTTP(w, r)
		return
	}
	rec := &routerAnswer{header: make(http.Header), code: http.StatusOK}
	h.ServeHTTP(rec, r)
	var msg string
	switch rec.code {
	case http.StatusNotFound:
		msg = fmt.Sprintf("no such endpoint: %s", r.URL.Path)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		msg = fmt.Sprintf("method %s not allowed for %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))
	default: // a redirect, say: the router's own answer
		a.mux.ServeHTTP(w, r)
		return
	}
	writeJSON(w, rec.code, map[string]string{"error": msg})
}

// routerAnswer takes what the router answers a request no route takes, to
// be told again as JSON.
type routerAnswer struct {
	header http.Header
	code   int
}

func (a *routerAnswer) Header() http.Header         { return a.header }
func (a *routerAnswer) Write(p []byte) (int, error) { return len(p), nil }
func (a *routerAnswer) WriteHeader(code int)        { a.code = code }

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 once the store is open and MQTT is connected, and
// while the store takes new readings.
func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if m := a.opts.MQTT(); !m.Connected {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: mqtt (%s %s) not connected", m.Mode, m.Address)
		if m.LastError != "" {
			fmt.Fprintf(w, ": %s", m.LastError)
		}
		fmt.Fprintln(w)
		return
	}
	if why := a.opts.Writer.PausedReason(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: ingest paused: %s\n", why)
		return
	}
	fmt.Fprintln(w, "ready")
}

func (a *API) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		a.opts.Logger.Error("http request failed", "err", err)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away; nothing to do
}
