package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

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
