package payload

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// A preset reads one family of devices as its firmware publishes them,
// with no parser configuration: a topic entry names it (mqtt.topics:
// [{preset: tasmota}]) and gets the family's routes — which topics carry
// readings and how to read them (device id, metric names, units, time),
// and which are the family's other traffic (availability, commands,
// bridge, discovery, meta), skipped and counted. docs/devices.md has a
// worked example of each; testdata/presets has messages copied from each
// family's own documentation.
type preset struct {
	name string
	// base is the topic level(s) the family's topics start with by
	// default, which a topic entry's base_topic replaces ("" if the
	// topics start with the device's own name).
	base string
	// local: times without an offset are the gateway's local time unless
	// the entry sets time_zone (the firmware writes local time).
	local  bool
	routes []presetRoute
	// exclude are the metrics of the family's diagnostic noise (radio
	// channel, memory, counters of the firmware's own), dropped unless a
	// topic entry's metrics say otherwise: Route.Metrics.
	exclude []string
}

// presetRoute is one route of a preset; "%base%" in its pattern stands for
// the base topic.
type presetRoute struct {
	pattern string
	skip    string
	format  Format
	read    readFunc
	// lineTags: see Route.lineTags.
	lineTags bool
	// payloadDevice: the payload may name another device than the topic
	// (see Route.payloadDevice).
	payloadDevice bool
	// texts reports the series whose values are texts (Route.texts).
	texts func(device, metric string) bool
}

// presets are the presets by name.
var presets = map[string]*preset{
	"tasmota":                   &tasmotaPreset,
	"zigbee2mqtt":               &zigbee2mqttPreset,
	"esphome":                   &esphomePreset,
	"shelly":                    &shellyPreset,
	"shelly-rpc":                &shellyRPCPreset,
	"homeassistant-statestream": &statestreamPreset,
	"openmqttgateway":           &openMQTTGatewayPreset,
	"ttn":                       &ttnPreset,
	"chirpstack":                &chirpstackPreset,
	"telegraf":                  &telegrafPreset,
	"senml":                     &senmlPreset,
}

// PresetNames returns the names of the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// PresetBase returns the default base topic of preset name ("" if its
// topics start with the device's name).
func PresetBase(name string) string {
	if p := presets[name]; p != nil {
		return p.base
	}
	return ""
}

// PresetRoute is one route of a preset: the topic pattern its messages
// come on ({device}, {metric}, + and # as in gateway.ParsePattern) and how
// they are read.
type PresetRoute struct {
	Pattern string
	Route   Route
}

// PresetRoutes returns the routes of the preset name, their topics under
// base ("" for the preset's own), with zone for times without an offset
// (nil: the preset's default, UTC or the gateway's local time). The
// patterns are not checked: a base with a wildcard or placeholder makes
// patterns the caller's parser refuses.
func PresetRoutes(name, base string, zone *time.Location) ([]PresetRoute, error) {
	p := presets[name]
	if p == nil {
		return nil, fmt.Errorf("unknown preset %q (want one of %s)", name, strings.Join(PresetNames(), ", "))
	}
	if base == "" {
		base = p.base
	} else if p.base == "" {
		return nil, fmt.Errorf("preset %s: its topics start with the device's name, so it takes no base_topic", name)
	}
	if zone == nil && p.local {
		zone = time.Local
	}
	routes := make([]PresetRoute, 0, len(p.routes))
	for _, pr := range p.routes {
		r := Route{Format: pr.format, Skip: pr.skip, Preset: name, Zone: zone, read: pr.read, lineTags: pr.lineTags, PayloadDevice: pr.payloadDevice, texts: pr.texts}
		if len(p.exclude) > 0 {
			r.Metrics = &Metrics{Exclude: p.exclude}
		}
		routes = append(routes, PresetRoute{Pattern: strings.ReplaceAll(pr.pattern, "%base%", base), Route: r})
	}
	return routes, nil
}

// PresetExclude returns the metric patterns the preset name drops by
// default (nil for none).
func PresetExclude(name string) []string {
	if p := presets[name]; p != nil {
		return slices.Clone(p.exclude)
	}
	return nil
}

// readJSON reads a preset's JSON document: it flattens the payload and
// hands it to fn with a docReader.
func readJSON(fn func(r *docReader, device, metric string, recv time.Time)) readFunc {
	return func(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
		r, err := d.readDocument(dst, payload)
		if err != nil {
			return dst, 0, err
		}
		fn(&r, device, metric, recv)
		switch {
		case r.skip != nil:
			return dst, 0, r.skip
		case r.err == nil && len(r.out) == r.first:
			// A device of the family sent a message without a value,
			// such as a button's action: settled, its fields counted.
			return dst, r.ignored, nil
		}
		return r.result(dst)
	}
}

// readText reads a plain value as a device that sends states as words
// does: text that is not a value is ignored and counted, not rejected.
func readText(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if _, kind, _ := parseText(payload); kind == textOther {
		return dst, 1, nil
	}
	return d.decodeValue(dst, payload, skipSpace(payload, 0), device, metric, recv)
}

// readState reads a plain value, or a text as a state ("heat", "home"),
// except a text that is a date and time (isTime), which is no state:
// ignored and counted.
func readState(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if _, kind, _ := parseText(payload); kind == textOther && isTime(trimText(payload)) {
		return dst, 1, nil
	}
	return d.decodeValue(dst, payload, skipSpace(payload, 0), device, metric, recv)
}

// isTime reports whether the text b is a date and time (RFC 3339 or ISO
// 8601, as parseISOTime reads them): a preset's text that says when, not
// which state.
func isTime(b []byte) bool {
	_, prob := parseISOTime(b, nil)
	return prob == ""
}

// notStates returns a docReader.notState that names the fields whose
// names match one of patterns (as Metrics' patterns match).
func notStates(patterns ...string) func(name []byte) bool {
	return func(name []byte) bool {
		for _, p := range patterns {
			if matchName(p, string(name)) {
				return true
			}
		}
		return false
	}
}

// textsOf returns a presetRoute.texts that names the metrics that match
// one of patterns (as Metrics' patterns match), of any device: the fields
// of a family whose values are modes or states, some of which are state
// words (a thermostat's system_mode: off, heat, cool; a switch's Action:
// ON, OFF, TOGGLE). A boolean field (a plug's state ON or OFF, a contact
// true or false) is no such field: it stays a number.
func textsOf(patterns ...string) func(device, metric string) bool {
	return func(_, metric string) bool {
		for _, p := range patterns {
			if matchName(p, metric) {
				return true
			}
		}
		return false
	}
}

// allTexts is the presetRoute.texts of a route whose every value that is
// not a number is a text (a select's option, a text sensor's text).
func allTexts(_, _ string) bool { return true }

// onlyTimes is the docReader.notState of a family whose every text is a
// state, but for a date and time.
func onlyTimes([]byte) bool { return false }

// noStates is the docReader.notState of a family that sends no states:
// each of its texts is an id, a version or raw data.
func noStates([]byte) bool { return true }

// keyUnit returns the unit in table of the metric name: that of the whole
// name, else that of the longest key of table the name ends in after a
// '.' (keys may hold a '.' themselves: "PM2.5", "aenergy.total").
func keyUnit(table map[string]string, name []byte) string {
	if u, ok := table[string(name)]; ok {
		return u
	}
	best, unit := 0, ""
	for k, u := range table {
		if len(k) > best && hasKey(name, k) {
			best, unit = len(k), u
		}
	}
	return unit
}

// hasKey reports whether the dotted name is key or ends in '.' key.
func hasKey(name []byte, key string) bool {
	n := len(name) - len(key)
	return n >= 0 && string(name[n:]) == key && (n == 0 || name[n-1] == '.')
}

// readAll makes every unused leaf (under prefix, if set, named without it)
// a reading of device at ts, with the unit unit gives.
func (r *docReader) readAll(prefix, device string, ts int64, unit func(name []byte) string) {
	r.readAllAs(prefix, "", device, ts, unit)
}

// readAllAs is readAll with each name put under the object as, if set
// ("switch:0" makes "apower" "switch:0.apower").
func (r *docReader) readAllAs(prefix, as, device string, ts int64, unit func(name []byte) string) {
	doc := &r.d.doc
	var name []byte
	for i := range doc.leaves {
		l := &doc.leaves[i]
		if l.used {
			continue
		}
		n := doc.name(l)
		if prefix != "" {
			if !doc.under(l, prefix) {
				continue
			}
			n = n[len(prefix)+1:]
		}
		name = name[:0]
		if as != "" {
			name = append(append(name, as...), '.')
		}
		name = append(name, n...)
		u := ""
		if unit != nil {
			u = unit(name)
		}
		r.emit(l, device, name, ts, u)
	}
}

// dropKeys marks as used every leaf whose last key is one of keys.
func (doc *document) dropKeys(keys ...string) {
	for i := range doc.leaves {
		_, key := splitLast(doc.name(&doc.leaves[i]))
		for _, k := range keys {
			if string(key) == k {
				doc.leaves[i].used = true
			}
		}
	}
}

// has reports whether the document has a leaf under prefix.
func (doc *document) has(prefix string) bool {
	for i := range doc.leaves {
		if doc.under(&doc.leaves[i], prefix) {
			return true
		}
	}
	return false
}

// The presets of standard formats.
var (
	// telegrafPreset reads Telegraf's MQTT output in line protocol, on
	// its default topic BASE/HOST/PLUGIN: the host tag is the device, else
	// the topic's host level, and the other tags are a part of the metric
	// name, "cpu.usage_idle{cpu=cpu0}", so that the series of one plugin
	// (a core, a disk) stay apart.
	telegrafPreset = preset{
		name: "telegraf", base: "telegraf",
		routes: []presetRoute{
			{pattern: "%base%/{device}/#", format: FormatInflux, lineTags: true, payloadDevice: true},
			{pattern: "%base%", format: FormatInflux, lineTags: true},
		},
	}
	senmlPreset = preset{
		name: "senml", base: "senml",
		routes: []presetRoute{
			{pattern: "%base%/{device}", format: FormatSenML},
			{pattern: "%base%", format: FormatSenML},
		},
	}
)
