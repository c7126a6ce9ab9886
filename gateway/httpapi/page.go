package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// The dashboard's fixed settings.
const (
	// pageRefresh is how often the page's script reloads its parts.
	pageRefresh = 10 * time.Second
	// quietAfter flags a device not seen for longer as quiet.
	quietAfter = 15 * time.Minute
	// rateWindow is the span over which the page's ingest rate is
	// measured (see rateSampler).
	rateWindow = time.Minute
	// chartsPerPage bounds the charts of one answer: a device's metrics
	// are charted this many at a time (dashboard.ChartPages).
	chartsPerPage = 12
	// listedMetrics bounds the latest values the device list shows of
	// one device; it says how many more there are.
	listedMetrics = 12
)

// page answers GET / with the dashboard, and GET /?part=NAME with one
// part of it (dashboard.WritePart): query device (default the first
// device), range (1h, 24h, 7d, 90d; default 24h), tz (an IANA zone;
// UTC when empty or unknown), and which of the device's metrics to
// chart: filter (those with it in their name, in any case) and page
// (from 1, chartsPerPage a page; one past the last is the last). A bad
// range, part, page or filter is a 400; a device that has no readings
// is a 404 with the page without charts (or with nothing, for a part).
func (a *API) page(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	rng := dashboard.Range24h
	if s := v.Get("range"); s != "" {
		var err error
		if rng, err = dashboard.ParseRange(s); err != nil {
			a.failPage(w, http.StatusBadRequest, fmt.Errorf("range: %w", err))
			return
		}
	}
	cp, err := chartPages(v)
	if err != nil {
		a.failPage(w, http.StatusBadRequest, err)
		return
	}
	part := v.Get("part")
	switch part {
	case "", dashboard.PartHealth, dashboard.PartDevices, dashboard.PartCharts:
	default:
		a.failPage(w, http.StatusBadRequest, fmt.Errorf("part: unknown part %q: want health, devices or charts", part))
		return
	}
	loc := time.UTC
	if tz := v.Get("tz"); tz != "" {
		if l, err := time.LoadLocation(tz); err == nil {
			loc = l
		}
	}
	now := a.now()
	p := dashboard.Page{
		Version:    a.opts.Version,
		Now:        now,
		Refresh:    pageRefresh,
		QuietAfter: quietAfter,
		Range:      rng,
		Location:   loc,
		ChartPages: cp,
	}
	code := http.StatusOK
	if part == "" || part == dashboard.PartHealth {
		if p.Health, err = a.health(now); err != nil {
			a.failPage(w, http.StatusInternalServerError, err)
			return
		}
	}
	if part == "" || part == dashboard.PartDevices {
		if p.Devices, err = a.pageDevices(); err != nil {
			a.failPage(w, http.StatusInternalServerError, err)
			return
		}
	}
	p.Device = v.Get("device")
	if p.Device == "" && part == "" && len(p.Devices) > 0 {
		p.Device = p.Devices[0].ID
	}
	if p.Device != "" && !a.knownDevice(p.Device) {
		code, p.Device = http.StatusNotFound, ""
		if part == dashboard.PartCharts {
			a.failPage(w, code, fmt.Errorf("device %q has no readings", v.Get("device")))
			return
		}
	}
	if p.Device != "" && (part == "" || part == dashboard.PartCharts) {
		if err = a.charts(&p, now); err != nil {
			a.failPage(w, http.StatusInternalServerError, err)
			return
		}
	}
	var buf bytes.Buffer
	if part == "" {
		err = dashboard.WritePage(&buf, p)
	} else {
		err = dashboard.WritePart(&buf, part, p)
	}
	if err != nil {
		a.failPage(w, http.StatusInternalServerError, err)
		return
	}
	writeHTML(w, code, a.csp, buf.Bytes())
}

// chartPages reads the query's filter and page of charts.
func chartPages(v url.Values) (dashboard.ChartPages, error) {
	cp := dashboard.ChartPages{Filter: v.Get("filter"), Page: 1, PerPage: chartsPerPage}
	if len(cp.Filter) > encoding.MaxMetricLen {
		return cp, fmt.Errorf("filter: longer than a metric name can be (%d bytes)", encoding.MaxMetricLen)
	}
	if s := v.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return cp, fmt.Errorf("page: must be a whole number from 1 (got %q)", s)
		}
		cp.Page = n
	}
	return cp, nil
}

// writeHTML answers code with the HTML body, under the policy csp.
func writeHTML(w http.ResponseWriter, code int, csp string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	w.WriteHeader(code)
	w.Write(body) //nolint:errcheck // the client went away; nothing to do
}

// failPage answers a request for the page with err as plain text.
func (a *API) failPage(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		a.opts.Logger.Error("http request failed", "err", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, err)
}

// favicon answers 204: the page has no icon, and a browser asks.
func (a *API) favicon(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

// health fills in the page's gateway health from what /v1/status reads.
func (a *API) health(now time.Time) (dashboard.Health, error) {
	st, err := a.opts.Store.Stats()
	if err != nil {
		return dashboard.Health{}, err
	}
	ws := a.opts.Writer.Stats()
	in := a.opts.Ingest.Stats()
	m := a.opts.MQTT()
	h := dashboard.Health{
		MQTT:       dashboard.MQTT{Mode: m.Mode, Address: m.Address, Connected: m.Connected, Clients: m.Clients, LastError: m.LastError},
		IngestRate: a.rate.rate(time.Now(), ws.Stored),
		Stored:     ws.Stored,
		Rejected:   in.Rejected,
		Unmatched:  in.Unmatched,
		Paused:     a.opts.Writer.PausedReason(),
		Store:      dashboard.Store{Readings: st.Readings, Series: st.Series, DiskBytes: st.DiskBytes},
	}
	if m.LastErrorAt != nil {
		h.MQTT.LastErrorAt = *m.LastErrorAt
	}
	for _, name := range sortedKeys(in.ByReason) {
		h.ByReason = append(h.ByReason, dashboard.Count{Name: name, N: in.ByReason[name]})
	}
	for _, e := range in.Examples {
		h.RecentRejections = append(h.RecentRejections, dashboard.Rejection{Time: e.Time, Topic: e.Topic, Reason: e.Reason, Detail: e.Detail})
	}
	for _, u := range in.RecentUnmatched {
		h.RecentUnmatched = append(h.RecentUnmatched, dashboard.Unmatched{Topic: u.Topic, Last: u.Last, Messages: u.Messages})
	}
	if a.opts.Headroom != nil {
		hs := a.opts.Headroom.Status()
		h.Store.FreeBytes, h.Store.ReserveBytes = hs.FreeBytes, hs.ReserveBytes
	}
	for _, u := range a.opts.Uplinks {
		us := u.Status()
		h.Uplinks = append(h.Uplinks, dashboard.Uplink{
			Name:          us.Name,
			Pending:       us.PendingReadings,
			OldestPending: deref(us.OldestPending),
			LastSuccess:   deref(us.LastSuccess),
			LastError:     us.LastError,
			LastErrorAt:   deref(us.LastErrorAt),
			NextAttempt:   deref(us.NextAttempt),
		})
	}
	if a.opts.Retention != nil {
		rs, err := a.opts.Retention.Status()
		if err != nil {
			return dashboard.Health{}, err
		}
		h.Store.MaxDiskBytes = rs.MaxDiskBytes
		h.Store.Limit, h.Store.EffectiveMaxDiskBytes = string(rs.DiskLimit), rs.EffectiveMaxDiskBytes
		h.Retention = &dashboard.Retention{
			Paused:        rs.PausedReason,
			LastRun:       deref(rs.LastRun),
			NextRun:       deref(rs.NextRun),
			Removed:       rs.RemovedReadings,
			DroppedUnsent: rs.DroppedUnsent,
			OldestReading: deref(rs.OldestReading),
		}
	}
	return h, nil
}

// nanosTime is ns since the epoch as a time; the zero time for
// math.MinInt64, never.
func nanosTime(ns int64) time.Time {
	if ns == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// pageDevices lists the devices, the first maxDevicesLimit by name, with
// the latest reading of each metric, or of the first listedMetrics of
// a device that has more: only those are read.
func (a *API) pageDevices() ([]dashboard.Device, error) {
	devs, _ := a.opts.Store.Devices("", maxDevicesLimit)
	out := make([]dashboard.Device, len(devs))
	listed := make(map[string][]string, len(devs))
	for i, d := range devs {
		n := min(len(d.Metrics), listedMetrics)
		out[i] = dashboard.Device{ID: d.Name, LastSeen: nanosTime(d.Heard), Newest: nanosTime(d.Last), Metrics: make([]dashboard.Metric, n), More: len(d.Metrics) - n}
		for j, name := range d.Metrics[:n] {
			out[i].Metrics[j] = dashboard.Metric{Name: name, Unit: d.Units[j]}
		}
		listed[d.Name] = d.Metrics[:n]
	}
	latest, err := a.opts.Store.LatestFunc(func(device, metric string) bool {
		_, found := slices.BinarySearch(listed[device], metric) // Devices sorts them
		return found
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		ms := out[i].Metrics
		for len(latest) > 0 && latest[0].Device == out[i].ID { // both sorted by device, then metric
			r := latest[0]
			latest = latest[1:]
			j, ok := slices.BinarySearchFunc(ms, r.Metric, func(m dashboard.Metric, name string) int { return strings.Compare(m.Name, name) })
			if !ok {
				continue
			}
			ms[j].Value, ms[j].Text, ms[j].Time = r.Value, r.Text, r.Time()
			if r.Unit != "" {
				ms[j].Unit = r.Unit
			}
		}
	}
	return out, nil
}

// charts draws p.Charts: a chart of p.Device over p.Range, ending at
// now, for each metric of the page p.ChartPages names (whose Metrics
// and Matching it sets, and whose Page it brings back to the last page
// there is): the Stats records of the range's level, and for a short
// range the raw readings too (one more than a chart draws, so that it
// knows when there are too many); a text series is charted from its
// readings instead (textChart). It reads only the page's metrics.
func (a *API) charts(p *dashboard.Page, now time.Time) error {
	device, rng, cp := p.Device, p.Range, &p.ChartPages
	devs, _ := a.opts.Store.Devices(prevName(device), 1)
	if len(devs) == 0 || devs[0].Name != device {
		return nil
	}
	metrics, units := devs[0].Metrics, devs[0].Units
	cp.Metrics = len(metrics)
	if cp.Filter != "" {
		want := strings.ToLower(cp.Filter)
		var ms, us []string
		for i, m := range metrics {
			if strings.Contains(strings.ToLower(m), want) {
				ms, us = append(ms, m), append(us, units[i])
			}
		}
		metrics, units = ms, us
	}
	cp.Matching = len(metrics)
	cp.Page = max(min(cp.Page, (len(metrics)+cp.PerPage-1)/cp.PerPage), 1)
	first := min((cp.Page-1)*cp.PerPage, len(metrics))
	last := min(first+cp.PerPage, len(metrics))
	from, to := rng.Window(now)
	for i, metric := range metrics[first:last] {
		c := dashboard.Chart{Title: device + ": " + metric, Unit: units[first+i], From: from, To: to, Level: rng.Level()}
		text, err := a.textChart(&c, device, metric)
		if err != nil {
			return err
		}
		if text {
			p.Charts = append(p.Charts, c)
			continue
		}
		recs, _, err := a.opts.Store.StatsByLevel(device, metric, rng.Level(), from.UnixNano(), to.UnixNano())
		if err != nil {
			return fmt.Errorf("stats of %s %s: %w", device, metric, err)
		}
		c.Buckets = make([]dashboard.Bucket, len(recs))
		for j, r := range recs {
			c.Buckets[j] = dashboard.Bucket{Start: time.Unix(0, r.Start), Stats: r.Stats}
		}
		if rng.Raw() {
			rs, err := a.opts.Store.Readings(buffer.Query{Device: device, Metric: metric, From: from.UnixNano(), To: to.UnixNano() + 1, Limit: 4*dashboard.MaxColumns + 1})
			if err != nil {
				return fmt.Errorf("readings of %s %s: %w", device, metric, err)
			}
			c.Points = make([]dashboard.Point, len(rs))
			for j, r := range rs {
				c.Points[j] = dashboard.Point{Time: r.Time(), Value: r.Value}
			}
		}
		p.Charts = append(p.Charts, c)
	}
	return nil
}

// prevName returns a name that sorts just before name, so that
// Store.Devices(prevName(name), 1) starts at name itself if it is
// stored: its last byte less one, then 0xff. No device id lies between
// the two, since an id is UTF-8, where 0xff never occurs.
func prevName(name string) string {
	if name == "" {
		return ""
	}
	b := []byte(name)
	last := len(b) - 1
	if b[last] == 0 {
		return string(b[:last])
	}
	b[last]--
	return string(b) + "\xff"
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]uint64) []string {
	return slices.Sorted(maps.Keys(m))
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// rateSampler measures the readings stored per second over about
// rateWindow from the Writer's counter, sampled when the page's health
// is asked for: no goroutine of its own. Until a sample is rateWindow
// old, the rate is over the time since the first sample (the API's
// start).
type rateSampler struct {
	mu      sync.Mutex // guards samples
	samples []rateSample
}

type rateSample struct {
	at     time.Time
	stored uint64
}

// maxRateSamples bounds the samples kept: one per rateWindow/maxRateSamples
// at most.
const maxRateSamples = 12

// rate records the counter stored at now and returns the readings per
// second since the newest sample at least rateWindow old (or the oldest
// kept).
func (s *rateSampler) rate(now time.Time, stored uint64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Drop what a younger sample already spans a window from.
	for len(s.samples) > 1 && now.Sub(s.samples[1].at) >= rateWindow {
		s.samples = s.samples[1:]
	}
	var r float64
	if len(s.samples) > 0 {
		old := s.samples[0]
		if dt := now.Sub(old.at).Seconds(); dt > 0 && stored >= old.stored {
			r = float64(stored-old.stored) / dt
		}
	}
	if n := len(s.samples); n == 0 || now.Sub(s.samples[n-1].at) >= rateWindow/maxRateSamples {
		if n == maxRateSamples {
			s.samples = append(s.samples[:0], s.samples[1:]...)
		}
		s.samples = append(s.samples, rateSample{at: now, stored: stored})
	}
	return r
}

// contentSecurityPolicy returns the policy of the dashboard's pages:
// nothing from anywhere but the gateway itself, and of inline code only
// the page's own style and script, named by their SHA-256.
func contentSecurityPolicy() (string, error) {
	var page bytes.Buffer
	if err := dashboard.WritePage(&page, dashboard.Page{}); err != nil {
		return "", err
	}
	style, ok1 := between(page.String(), "<style>", "</style>")
	script, ok2 := between(page.String(), "<script>", "</script>")
	if !ok1 || !ok2 {
		return "", errors.New("dashboard: the page has no inline style or script to allow")
	}
	return "default-src 'none'; style-src " + hashSource(style) + "; script-src " + hashSource(script) +
		"; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'", nil
}

// between returns the text of s between the first open and the close
// after it.
func between(s, open, close string) (string, bool) {
	_, rest, ok := strings.Cut(s, open)
	if !ok {
		return "", false
	}
	in, _, ok := strings.Cut(rest, close)
	return in, ok
}

func hashSource(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}
