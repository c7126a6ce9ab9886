package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

type readingJSON struct {
	Metric string  `json:"metric"`
	TS     string  `json:"ts"`
	Value  float64 `json:"value"`
	// Text is the text of a reading of a text series, written instead
	// of Value (MarshalJSON).
	Text string `json:"text,omitempty"`
}

// Query limits of the readings endpoint.
const (
	defaultLimit = 50
	maxLimit     = 10000
)

// readings answers /v1/devices/{device}/readings?metric=&from=&to=&limit=&order=&format=.
// With a metric, "unit" is its unit; without, "units" maps each metric of
// the readings whose unit is known to it. Either is absent when no unit
// is known. It answers in CSV when asked (wantCSV): a row a reading, with
// its metric's unit.
func (a *API) readings(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if encoding.CheckName(device, encoding.MaxDeviceLen) != "" {
		a.fail(w, http.StatusBadRequest, fmt.Errorf("device %q: not a valid device id (%s)", device, queryNameRule(encoding.MaxDeviceLen)))
		return
	}
	q, err := parseReadingsQuery(device, r, a.now().UnixNano())
	if err != nil {
		a.fail(w, http.StatusBadRequest, err)
		return
	}
	asCSV, err := wantCSV(r)
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
		out.Readings[i] = readingJSON{Metric: rd.Metric, TS: rd.Time().Format(time.RFC3339Nano), Value: rd.Value, Text: rd.Text}
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
	if asCSV {
		units := out.Units
		if q.Metric != "" {
			units = map[string]string{q.Metric: out.Unit}
		}
		writeReadingsCSV(w, device, q.Metric, rs, units)
		return
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

// defaultStatsRange is how long before to a stats request without from
// starts.
const defaultStatsRange = int64(24 * time.Hour)

// stats answers /v1/devices/{device}/stats?metric=&from=&to=&group=&format=,
// with the metric's unit in "unit" (absent when not known). to is now
// unless told, from 24 hours before to. It answers in CSV when asked
// (wantCSV).
func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	v := r.URL.Query()
	metric, group := v.Get("metric"), v.Get("group")
	var errs []string
	if encoding.CheckName(device, encoding.MaxDeviceLen) != "" {
		errs = append(errs, fmt.Sprintf("device %q: not a valid device id", device))
	}
	if encoding.CheckName(metric, encoding.MaxMetricLen) != "" {
		errs = append(errs, fmt.Sprintf("metric: required, a valid metric name (got %q)", metric))
	}
	now := a.now().UnixNano()
	from, to := int64(math.MinInt64), now
	fromText, toText := v.Get("from"), v.Get("to")
	var err error
	if toText == "" {
		toText = "now"
	} else if to, err = parseTime(toText, true, now); err != nil {
		errs = append(errs, "to: "+err.Error())
	}
	if fromText == "" {
		fromText = "24h before to"
		if to >= math.MinInt64+defaultStatsRange {
			from = to - defaultStatsRange
		}
	} else if from, err = parseTime(fromText, false, now); err != nil {
		errs = append(errs, "from: "+err.Error())
	}
	if len(errs) == 0 && from >= to {
		errs = append(errs, fmt.Sprintf("from (%s) must be before to (%s)", fromText, toText))
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
			errs = append(errs, fmt.Sprintf("group: more than %d %ss from %s to %s; use a longer group or a shorter range", maxStatsGroups, group, fromText, toText))
		}
	}
	asCSV, err := wantCSV(r)
	if err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		a.fail(w, http.StatusBadRequest, errors.New(strings.Join(errs, "; ")))
		return
	}
	if !a.knownDevice(device) {
		a.fail(w, http.StatusNotFound, fmt.Errorf("device %q has no readings", device))
		return
	}
	if a.opts.Store.IsText(device, metric) {
		a.states(w, device, metric, group, level, from, to, now, asCSV)
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
	if asCSV {
		writeStatsCSV(w, device, metric, groups, out.Unit)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) knownDevice(device string) bool {
	return a.opts.Store.HasDevice(device)
}

// queryNameRule says what a query takes to name a device or a metric:
// the store's own rule (encoding.CheckName), 1 to max bytes of printable
// UTF-8; a device the store does not hold gets 404. In a path, a device id
// is one segment, percent-encoded where it must be (kitchen%2Fdoor for
// kitchen/door).
func queryNameRule(max int) string {
	return fmt.Sprintf("1-%d bytes of printable UTF-8", max)
}

// parseReadingsQuery reads metric, from, to, limit and order; now is the
// time that times from now count from.
func parseReadingsQuery(device string, r *http.Request, now int64) (buffer.Query, error) {
	v := r.URL.Query()
	if m := v.Get("metric"); m != "" && encoding.CheckName(m, encoding.MaxMetricLen) != "" {
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
		if q.From, err = parseTime(s, false, now); err != nil {
			return q, fmt.Errorf("from: %w", err)
		}
	}
	if s := v.Get("to"); s != "" {
		if q.To, err = parseTime(s, true, now); err != nil {
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
