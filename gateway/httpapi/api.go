// Package httpapi is cairn's local HTTP API: health, status, the devices
// and their readings and aggregates, and the Prometheus metrics, behind a
// guard (bearer token, request size, query rate). It reads the store and
// the counters of every part through the small interfaces below, which
// cmd/cairn fills with the real parts.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/uplink"
)

// Store is what the API asks of the store (a *buffer.Store): its size and
// series, and its queries.
type Store interface {
	Stats() (buffer.Stats, error)
	HasDevice(device string) bool
	Devices(after string, limit int) ([]buffer.Device, bool)
	Readings(q buffer.Query) ([]buffer.Reading, error)
	StatsCover(device, metric string, from, to int64) (aggregate.Stats, buffer.Reads, error)
	StatsByLevel(device, metric string, level aggregate.Level, from, to int64) ([]buffer.StatsAt, buffer.Reads, error)
	Unit(device, metric string) string
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
	Clients   int64  `json:"clients,omitempty"`
	// Refused counts what the embedded broker refused (connections,
	// publishes, subscriptions, limits), by reason; see gateway.Refusals.
	Refused         uint64            `json:"refused"`
	RefusedByReason map[string]uint64 `json:"refused_by_reason,omitempty"`
}

// Options configure the HTTP API. Store, Writer, Ingest, MQTT, Registry
// and Logger are required; the others are left nil where the gateway has
// no such part (no uplink: it works offline).
type Options struct {
	Store  Store
	Writer Writer
	Ingest Ingest
	MQTT   func() MQTTStatus
	Uplink Uplink // nil when the gateway works offline
	// Retention, when set, is reported under "retention".
	Retention Retention
	// Headroom, when set, reports the free space under "store".
	Headroom Headroom
	// Clock, when set, is reported under "clock", and is the clock of
	// queries' default times.
	Clock    Clock
	Version  string
	Started  time.Time
	Registry *prometheus.Registry
	Logger   *slog.Logger
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
}

// New creates the API and registers its metrics with opts.Registry.
func New(opts Options) (*API, error) {
	a := &API{opts: opts, mux: http.NewServeMux()}
	if err := opts.Registry.Register(newCollector(opts)); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	a.mux.HandleFunc("GET /healthz", a.healthz)
	a.mux.HandleFunc("GET /readyz", a.readyz)
	a.mux.HandleFunc("GET /v1/status", a.status)
	a.mux.HandleFunc("GET /v1/devices", a.devices)
	a.mux.HandleFunc("GET /v1/devices/{device}/readings", a.readings)
	a.mux.HandleFunc("GET /v1/devices/{device}/stats", a.stats)
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{}))
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
		fmt.Fprintf(w, "not ready: mqtt (%s %s) not connected\n", m.Mode, m.Address)
		return
	}
	if why := a.opts.Writer.PausedReason(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: ingest paused: %s\n", why)
		return
	}
	fmt.Fprintln(w, "ready")
}

// Status is the document served at /v1/status.
type Status struct {
	Version       string              `json:"version"`
	Started       time.Time           `json:"started"`
	UptimeSeconds int64               `json:"uptime_seconds"`
	MQTT          MQTTStatus          `json:"mqtt"`
	Ingest        gateway.IngestStats `json:"ingest"`
	Store         StoreStatus         `json:"store"`
	// Uplink is absent when no uplink is configured.
	Uplink *uplink.Status `json:"uplink,omitempty"`
	// Retention says what retention removed, and why it may be paused.
	Retention *buffer.RetentionStatus `json:"retention,omitempty"`
	// Clock says whether the clock is synchronised and trusted.
	Clock *buffer.ClockStatus `json:"clock,omitempty"`
}

// StoreStatus is the store part of Status.
type StoreStatus struct {
	Readings uint64 `json:"readings"`
	Series   int    `json:"series"`
	// MaxSeries and MaxSeriesPerDevice are the limits on series (0:
	// none); a reading over one is refused (IngestStats.Refused).
	MaxSeries          int   `json:"max_series"`
	MaxSeriesPerDevice int   `json:"max_series_per_device"`
	DiskBytes          int64 `json:"disk_bytes"`
	// DiskFreeBytes is what the data directory's file system has free;
	// ingest pauses below DiskReserveBytes. ReserveFileBytes is held by
	// the reserve file, given up when the disk is full.
	DiskFreeBytes    int64 `json:"disk_free_bytes"`
	DiskReserveBytes int64 `json:"disk_reserve_bytes"`
	ReserveFileBytes int64 `json:"reserve_file_bytes"`
	// ForeignBytes is held by files in the data directory that are not
	// cairn's (ForeignFiles names a few): not counted by the disk cap,
	// never deleted.
	ForeignBytes int64    `json:"foreign_bytes"`
	ForeignFiles []string `json:"foreign_files,omitempty"`
	Commits      uint64   `json:"commits"`
	CommitErrors uint64   `json:"commit_errors"`
	Sealed       uint64   `json:"sealed"`
	SealErrors   uint64   `json:"seal_errors"`
	StatsPruned  uint64   `json:"stats_pruned"`
	Pruned       uint64   `json:"readings_pruned"`
	CommitMillis float64  `json:"commit_ms_avg"`
}

func (a *API) status(w http.ResponseWriter, _ *http.Request) {
	st, err := a.opts.Store.Stats()
	if err != nil {
		a.fail(w, http.StatusInternalServerError, err)
		return
	}
	ws := a.opts.Writer.Stats()
	s := Status{
		Version:       a.opts.Version,
		Started:       a.opts.Started.UTC(),
		UptimeSeconds: int64(time.Since(a.opts.Started).Seconds()),
		MQTT:          a.opts.MQTT(),
		Ingest:        a.opts.Ingest.Stats(),
		Store: StoreStatus{
			Readings:         st.Readings,
			Series:           st.Series,
			DiskBytes:        st.DiskBytes,
			ReserveFileBytes: st.ReserveFileBytes,
			ForeignBytes:     st.ForeignBytes,
			ForeignFiles:     st.ForeignFiles,
			Commits:          ws.Commits,
			CommitErrors:     ws.Failures,
			Sealed:           ws.Sealed,
			SealErrors:       ws.SealErrors,
			StatsPruned:      ws.Pruned,
			Pruned:           ws.PrunedReadings,
		},
	}
	s.Store.MaxSeries, s.Store.MaxSeriesPerDevice = a.opts.Writer.SeriesLimits()
	s.Ingest.PausedReason = a.opts.Writer.PausedReason()
	s.Ingest.Paused = s.Ingest.PausedReason != ""
	if a.opts.Headroom != nil {
		hs := a.opts.Headroom.Status()
		s.Store.DiskFreeBytes, s.Store.DiskReserveBytes = hs.FreeBytes, hs.ReserveBytes
	}
	if n := ws.Commits + ws.Failures; n > 0 {
		s.Store.CommitMillis = float64(ws.SyncNanos) / float64(n) / 1e6
	}
	if a.opts.Uplink != nil {
		us := a.opts.Uplink.Status()
		s.Uplink = &us
	}
	if a.opts.Retention != nil {
		rs, err := a.opts.Retention.Status()
		if err != nil {
			a.fail(w, http.StatusInternalServerError, err)
			return
		}
		s.Retention = &rs
	}
	if a.opts.Clock != nil {
		cs := a.opts.Clock.Status()
		s.Clock = &cs
	}
	writeJSON(w, http.StatusOK, s)
}

type deviceJSON struct {
	Device  string   `json:"device"`
	Metrics []string `json:"metrics"`
	// Units maps each metric whose unit is known to it; absent when no
	// metric has one.
	Units    map[string]string `json:"units,omitempty"`
	LastSeen string            `json:"last_seen"`
}

// Page sizes of the devices endpoint: a page holds at most
// store.max_series_per_device metrics per device.
const (
	defaultDevicesLimit = 100
	maxDevicesLimit     = 1000
)

// devices answers /v1/devices?limit=&after=: the devices sorted by name,
// limit of them from the first after the device named after. next is the
// after of the next page, absent on the last.
func (a *API) devices(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	limit := defaultDevicesLimit
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxDevicesLimit {
			a.fail(w, http.StatusBadRequest, fmt.Errorf("limit: must be from 1 to %d (got %q)", maxDevicesLimit, s))
			return
		}
		limit = n
	}
	after := v.Get("after")
	if after != "" && !queryName(after, buffer.MaxDeviceLen) {
		a.fail(w, http.StatusBadRequest, fmt.Errorf("after: must be a device id (%s) (got %q)", queryNameRule(buffer.MaxDeviceLen), after))
		return
	}
	page, more := a.opts.Store.Devices(after, limit)
	out := struct {
		Devices []deviceJSON `json:"devices"`
		Next    string       `json:"next,omitempty"`
	}{Devices: make([]deviceJSON, len(page))}
	for i, d := range page {
		out.Devices[i] = deviceJSON{Device: d.Name, Metrics: d.Metrics, LastSeen: time.Unix(0, d.Last).UTC().Format(time.RFC3339Nano)}
		for j, u := range d.Units {
			if u == "" {
				continue
			}
			if out.Devices[i].Units == nil {
				out.Devices[i].Units = make(map[string]string)
			}
			out.Devices[i].Units[d.Metrics[j]] = u
		}
	}
	if more {
		out.Next = page[len(page)-1].Name
	}
	writeJSON(w, http.StatusOK, out)
}

type readingJSON struct {
	Metric string  `json:"metric"`
	TS     string  `json:"ts"`
	Value  float64 `json:"value"`
}

// Query limits of the readings endpoint.
const (
	defaultLimit = 50
	maxLimit     = 10000
)

// readings answers /v1/devices/{device}/readings?metric=&from=&to=&limit=&order=.
// With a metric, "unit" is its unit; without, "units" maps each metric of
// the readings whose unit is known to it. Either is absent when no unit
// is known.
func (a *API) readings(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if !queryName(device, buffer.MaxDeviceLen) {
		a.fail(w, http.StatusBadRequest, fmt.Errorf("device %q: not a valid device id (%s)", device, queryNameRule(buffer.MaxDeviceLen)))
		return
	}
	q, err := parseReadingsQuery(device, r)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err)
		return
	}
	if !a.knownDevice(device) {
		a.fail(w, http.StatusNotFound, fmt.Errorf("device %q has no readings", device))
		return
	}
	rs, err := a.opts.Store.Readings(q)
	if err != nil {
		a.fail(w, http.StatusInternalServerError, err)
		return
	}
	out := struct {
		Device   string            `json:"device"`
		Unit     string            `json:"unit,omitempty"`
		Units    map[string]string `json:"units,omitempty"`
		Readings []readingJSON     `json:"readings"`
	}{Device: device, Readings: make([]readingJSON, len(rs))}
	for i, rd := range rs {
		out.Readings[i] = readingJSON{Metric: rd.Metric, TS: rd.Time().Format(time.RFC3339Nano), Value: rd.Value}
	}
	if q.Metric != "" {
		out.Unit = a.opts.Store.Unit(device, q.Metric)
	} else {
		seen := make(map[string]bool)
		for _, rd := range rs {
			if seen[rd.Metric] {
				continue
			}
			seen[rd.Metric] = true
			if u := a.opts.Store.Unit(device, rd.Metric); u != "" {
				if out.Units == nil {
					out.Units = make(map[string]string)
				}
				out.Units[rd.Metric] = u
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

type statsJSON struct {
	Start  string  `json:"start"`
	Count  uint64  `json:"count"`
	Sum    float64 `json:"sum"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	SumSqr float64 `json:"sumsqr"`
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"stddev"`
}

// maxStatsGroups bounds the groups one stats request may return.
const maxStatsGroups = 10000

// stats answers /v1/devices/{device}/stats?metric=&from=&to=&group=,
// with the metric's unit in "unit" (absent when not known).
func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	v := r.URL.Query()
	metric, group := v.Get("metric"), v.Get("group")
	var errs []string
	if !queryName(device, buffer.MaxDeviceLen) {
		errs = append(errs, fmt.Sprintf("device %q: not a valid device id", device))
	}
	if !queryName(metric, buffer.MaxMetricLen) {
		errs = append(errs, fmt.Sprintf("metric: required, a valid metric name (got %q)", metric))
	}
	from, to := int64(math.MinInt64), a.now().UnixNano()
	var err error
	if s := v.Get("from"); s == "" {
		errs = append(errs, "from: required (RFC 3339 or Unix seconds or milliseconds)")
	} else if from, err = parseTime(s, false); err != nil {
		errs = append(errs, "from: "+err.Error())
	}
	if s := v.Get("to"); s != "" {
		if to, err = parseTime(s, true); err != nil {
			errs = append(errs, "to: "+err.Error())
		}
	}
	if len(errs) == 0 && from >= to {
		errs = append(errs, fmt.Sprintf("from (%s) must be before to (%s)", v.Get("from"), v.Get("to")))
	}
	var level aggregate.Level
	switch group {
	case "all":
	case "":
		group = "all"
	default:
		if level, err = aggregate.ParseLevel(group); err != nil {
			errs = append(errs, fmt.Sprintf("group: must be minute, hour, day or all (got %q)", group))
		} else if len(errs) == 0 && (uint64(to)-uint64(from))/uint64(level.Duration()) > maxStatsGroups {
			errs = append(errs, fmt.Sprintf("group: more than %d %ss from %s to %s; use a longer group or a shorter range", maxStatsGroups, group, v.Get("from"), v.Get("to")))
		}
	}
	if len(errs) > 0 {
		a.fail(w, http.StatusBadRequest, errors.New(strings.Join(errs, "; ")))
		return
	}
	if !a.knownDevice(device) {
		a.fail(w, http.StatusNotFound, fmt.Errorf("device %q has no readings", device))
		return
	}
	var groups []buffer.StatsAt
	if group == "all" {
		st, _, err := a.opts.Store.StatsCover(device, metric, from, to)
		if err != nil {
			a.fail(w, http.StatusInternalServerError, err)
			return
		}
		if !st.IsEmpty() {
			groups = append(groups, buffer.StatsAt{Start: from, Stats: st})
		}
	} else {
		groups, _, err = a.opts.Store.StatsByLevel(device, metric, level, from, to)
		if err != nil {
			a.fail(w, http.StatusInternalServerError, err)
			return
		}
	}
	out := struct {
		Device string      `json:"device"`
		Metric string      `json:"metric"`
		Unit   string      `json:"unit,omitempty"`
		Group  string      `json:"group"`
		Stats  []statsJSON `json:"stats"`
	}{Device: device, Metric: metric, Unit: a.opts.Store.Unit(device, metric), Group: group, Stats: make([]statsJSON, len(groups))}
	for i, g := range groups {
		st := g.Stats
		out.Stats[i] = statsJSON{
			Start: time.Unix(0, g.Start).UTC().Format(time.RFC3339Nano),
			Count: st.Count, Sum: st.Sum, Min: st.Min, Max: st.Max, SumSqr: st.SumSqr,
			Mean: st.Mean(), StdDev: st.StdDev(),
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) knownDevice(device string) bool {
	return a.opts.Store.HasDevice(device)
}

// queryName reports whether s can name a device or a metric in a query:
// the store's own rule (buffer.CheckName), 1 to max bytes of printable
// UTF-8; a device the store does not hold gets 404. In a path, a device id
// is one segment, percent-encoded where it must be (kitchen%2Fdoor for
// kitchen/door).
func queryName(s string, max int) bool { return buffer.CheckName(s, max) == "" }

// queryNameRule says what queryName takes.
func queryNameRule(max int) string {
	return fmt.Sprintf("1-%d bytes of printable UTF-8", max)
}

// parseReadingsQuery reads metric, from, to, limit and order.
func parseReadingsQuery(device string, r *http.Request) (buffer.Query, error) {
	v := r.URL.Query()
	if m := v.Get("metric"); m != "" && !queryName(m, buffer.MaxMetricLen) {
		return buffer.Query{}, fmt.Errorf("metric %q: not a valid metric name", m)
	}
	q := buffer.Query{
		Device: device,
		Metric: v.Get("metric"),
		From:   math.MinInt64,
		To:     math.MaxInt64,
		Desc:   true,
		Limit:  defaultLimit,
	}
	var err error
	if s := v.Get("from"); s != "" {
		if q.From, err = parseTime(s, false); err != nil {
			return q, fmt.Errorf("from: %w", err)
		}
	}
	if s := v.Get("to"); s != "" {
		if q.To, err = parseTime(s, true); err != nil {
			return q, fmt.Errorf("to: %w", err)
		}
	}
	if q.From > q.To {
		return q, fmt.Errorf("from (%s) is after to (%s)", v.Get("from"), v.Get("to"))
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return q, fmt.Errorf("limit: must be an integer from 1 to %d (got %q)", maxLimit, s)
		}
		q.Limit = n
	}
	switch o := v.Get("order"); o {
	case "", "desc":
	case "asc":
		q.Desc = false
	default:
		return q, fmt.Errorf("order: must be asc or desc (got %q)", o)
	}
	return q, nil
}

// The times a query can name: those of an int64 of nanoseconds since the
// epoch, as the store keeps them.
var (
	minQueryTime = time.Unix(0, math.MinInt64).UTC()
	maxQueryTime = time.Unix(0, math.MaxInt64).UTC()
)

// errTimeRange says which times a query may name.
var errTimeRange = fmt.Errorf("outside the times the store can hold (%s to %s)",
	minQueryTime.Format(time.RFC3339), maxQueryTime.Format(time.RFC3339))

// parseTime reads a time parameter, in nanoseconds since the epoch: RFC
// 3339, or a non-negative integer of Unix seconds, milliseconds,
// microseconds or nanoseconds told apart by its magnitude as payload
// timestamps are (gateway.EpochMillisFrom). A time after what the store can hold
// is math.MaxInt64 when upper (for "to": no upper bound), else an error,
// as is one before it.
func parseTime(s string, upper bool) (int64, error) {
	beyond := func() (int64, error) {
		if upper {
			return math.MaxInt64, nil
		}
		return 0, fmt.Errorf("%q: %w", s, errTimeRange)
	}
	if s != "" && '0' <= s[0] && s[0] <= '9' && strings.Trim(s, "0123456789") == "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return beyond() // more digits than any time the store holds
		}
		unit := uint64(time.Second)
		switch {
		case v >= gateway.EpochNanosFrom:
			unit = 1
		case v >= gateway.EpochMicrosFrom:
			unit = uint64(time.Microsecond)
		case v >= gateway.EpochMillisFrom:
			unit = uint64(time.Millisecond)
		}
		if v > math.MaxInt64/unit {
			return beyond()
		}
		return int64(v * unit), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q: want RFC 3339 (2026-11-22T10:00:00Z) or Unix seconds or milliseconds", s)
	}
	switch {
	case t.After(maxQueryTime):
		return beyond()
	case t.Before(minQueryTime):
		return 0, fmt.Errorf("%q: %w", s, errTimeRange)
	}
	return t.UnixNano(), nil
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
