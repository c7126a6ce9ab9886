package gateway

import (
	"strings"
	"sync"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/gateway/payload"
)

// Route maps the topics that match Pattern to how their messages are read
// (payload.Route): a payload format, or a preset's reader or a mapping;
// the units of their metrics; the zone of their local times; and the
// checks their readings must pass.
type Route struct {
	Pattern Pattern
	payload.Route
}

// unitBook holds units that messages give for other messages' readings:
// Home Assistant's unit_of_measurement attribute, ESPHome's discovery
// config (payload.Units). It is bounded: once full it learns no more.
type unitBook struct {
	mu    sync.RWMutex
	units map[string]map[string]string // device → metric → unit
	n     int                          // units held
}

// maxLearnedUnits bounds a unitBook (a series limit's worth).
const maxLearnedUnits = 20000

// Unit returns the unit learned for the series, or "".
func (b *unitBook) Unit(device, metric string) string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.units[device][metric] // builds no key: every reading without a unit looks here
}

// Learn records unit for the series, if it is a valid unit.
func (b *unitBook) Learn(device, metric, unit string) {
	if encoding.CheckName(unit, encoding.MaxUnitLen) != "" || encoding.CheckDevice(device) != "" || encoding.CheckName(metric, encoding.MaxMetricLen) != "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.units == nil {
		b.units = make(map[string]map[string]string)
	}
	metrics := b.units[device]
	if _, ok := metrics[metric]; !ok {
		if b.n >= maxLearnedUnits {
			return
		}
		b.n++
	}
	if metrics == nil {
		metrics = make(map[string]string)
		b.units[strings.Clone(device)] = metrics
	}
	metrics[strings.Clone(metric)] = strings.Clone(unit)
}
