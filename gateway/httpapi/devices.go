package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"

	"github.com/cairn-gateway/cairn/buffer"
)

type deviceJSON struct {
	Device  string   `json:"device"`
	Metrics []string `json:"metrics"`
	// Units maps each metric whose unit is known to it; absent when no
	// metric has one.
	Units map[string]string `json:"units,omitempty"`
	// LastSeen is when cairn last heard from the device (a message that
	// brought a reading it stored, not a duplicate), by the gateway's clock,
	// to the minute across a restart; NewestReading is the time of the
	// newest reading stored, as the reading says (the device's clock, or
	// the receive time when the payload has none).
	LastSeen      string `json:"last_seen"`
	NewestReading string `json:"newest_reading"`
	// Latest maps each metric that has a raw reading stored to its
	// newest one.
	Latest map[string]latestJSON `json:"latest"`
}

// latestJSON is the newest reading of a metric.
type latestJSON struct {
	TS    string  `json:"ts"`
	Value float64 `json:"value"`
	// Text is the text of a reading of a text series, written instead
	// of Value (MarshalJSON).
	Text string `json:"text,omitempty"`
	Unit string `json:"unit,omitempty"`
}

// latestByMetric maps the metric of each of rs, readings of one device, to
// the reading.
func latestByMetric(rs []buffer.Reading) map[string]latestJSON {
	out := make(map[string]latestJSON, len(rs))
	for _, r := range rs {
		out[r.Metric] = latestJSON{TS: r.Time().Format(time.RFC3339Nano), Value: r.Value, Text: r.Text, Unit: r.Unit}
	}
	return out
}

// formatNanos formats ns since the epoch as RFC 3339 in UTC; "" for
// math.MinInt64, never.
func formatNanos(ns int64) string {
	if ns == math.MinInt64 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// Page sizes of the devices endpoint: a page holds at most
// store.max_series_per_device metrics per device.
const (
	defaultDevicesLimit = 100
	maxDevicesLimit     = 1000
)

// devices answers /v1/devices?limit=&after=: the devices sorted by name,
// limit of them from the first after the device named after, each with
// the newest reading of each metric. next is the after of the next page,
// absent on the last.
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
	if after != "" && encoding.CheckName(after, encoding.MaxDeviceLen) != "" {
		a.fail(w, http.StatusBadRequest, fmt.Errorf("after: must be a device id (%s) (got %q)", queryNameRule(encoding.MaxDeviceLen), after))
		return
	}
	page, more := a.opts.Store.Devices(after, limit)
	names := make([]string, len(page))
	for i, d := range page {
		names[i] = d.Name
	}
	latest, err := a.opts.Store.Latest(names...)
	if err != nil {
		a.fail(w, http.StatusInternalServerError, err)
		return
	}
	out := struct {
		Devices []deviceJSON `json:"devices"`
		Next    string       `json:"next,omitempty"`
	}{Devices: make([]deviceJSON, len(page))}
	for i, d := range page {
		out.Devices[i] = deviceJSON{Device: d.Name, Metrics: d.Metrics, LastSeen: formatNanos(d.Heard), NewestReading: formatNanos(d.Last)}
		n := 0 // latest is sorted by device, as page is
		for n < len(latest) && latest[n].Device == d.Name {
			n++
		}
		out.Devices[i].Latest, latest = latestByMetric(latest[:n]), latest[n:]
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

// latest answers /v1/devices/{device}/latest: the newest reading of each
// metric of the device, with its time and unit, by metric. A metric whose
// raw readings retention removed is left out.
func (a *API) latest(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if encoding.CheckName(device, encoding.MaxDeviceLen) != "" {
		a.fail(w, http.StatusBadRequest, fmt.Errorf("device %q: not a valid device id (%s)", device, queryNameRule(encoding.MaxDeviceLen)))
		return
	}
	if !a.knownDevice(device) {
		a.fail(w, http.StatusNotFound, fmt.Errorf("device %q has no readings", device))
		return
	}
	rs, err := a.opts.Store.Latest(device)
	if err != nil {
		a.fail(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Device string                `json:"device"`
		Latest map[string]latestJSON `json:"latest"`
	}{Device: device, Latest: latestByMetric(rs)})
}
