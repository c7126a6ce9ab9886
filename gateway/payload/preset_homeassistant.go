package payload

import (
	"slices"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// statestreamPreset reads Home Assistant's MQTT Statestream
// (https://www.home-assistant.io/integrations/mqtt_statestream/): each
// entity's state on BASE/DOMAIN/ENTITY/state, plain, and with
// publish_attributes each attribute on BASE/DOMAIN/ENTITY/ATTRIBUTE,
// JSON-encoded. The device is the entity id, DOMAIN.ENTITY; its state is
// metric "state", whose unit the unit_of_measurement attribute gives.
var statestreamPreset = preset{
	name: "homeassistant-statestream", base: "homeassistant",
	routes: []presetRoute{
		{pattern: "%base%/{device}/{device}/state", read: statestreamState, texts: statestreamTexts},
		{pattern: "%base%/{device}/{device}/unit_of_measurement", read: statestreamUnit},
		{pattern: "%base%/{device}/{device}/friendly_name", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/icon", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/device_class", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/state_class", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/last_changed", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/last_updated", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/last_reported", skip: SkipMeta},
		{pattern: "%base%/{device}/{device}/{metric}", read: statestreamAttribute, texts: statestreamTexts},
	},
}

// statestreamTextDomains are the domains whose entities' states are texts,
// some of which are state words
// (https://developers.home-assistant.io/docs/core/entity/climate/ and the
// other entity pages): a climate's or water heater's mode (off, heat,
// cool, eco), a cover's or valve's (open, closed, opening), a lock's
// (locked, unlocked, open), a media player's (off, on, playing), an
// alarm's, a vacuum's or a lawn mower's, a person's or tracker's zone, a
// select's option. A light's, switch's or binary sensor's on and off are
// booleans: numbers.
var statestreamTextDomains = []string{"alarm_control_panel", "climate", "cover", "device_tracker", "input_select",
	"lawn_mower", "lock", "media_player", "person", "select", "vacuum", "valve", "water_heater"}

// statestreamTextAttributes are the attributes whose values are modes:
// a climate's hvac_action (off, heating), fan_mode (on, off, auto) and
// the like.
var statestreamTextAttributes = textsOf("hvac_action", "hvac_mode", "fan_mode", "preset_mode", "swing_mode", "swing_horizontal_mode")

// statestreamTexts reports the series whose values are texts: the state
// of an entity of statestreamTextDomains, and the attributes of
// statestreamTextAttributes. The device is the entity id, DOMAIN.ENTITY.
func statestreamTexts(device, metric string) bool {
	if metric != "state" {
		return statestreamTextAttributes(device, metric)
	}
	domain, _, _ := strings.Cut(device, ".")
	return slices.Contains(statestreamTextDomains, domain)
}

// statestreamState reads an entity's state as metric "state": a number,
// a state word, or a text ("home", "heat"), but for a date and time (a
// timestamp sensor's), which is ignored.
func statestreamState(d *Decoder, dst []buffer.Reading, payload []byte, device, _ string, recv time.Time) ([]buffer.Reading, int, error) {
	return readState(d, dst, payload, device, "state", recv)
}

// statestreamNotStates are the attributes whose text is no state: ids,
// pictures, versions and links, credits, and times.
var statestreamNotStates = notStates("id", "*_id", "entity_picture", "attribution", "*version*", "*_url", "release_summary",
	"title", "last_*", "next_*", "*_at")

// statestreamUnit notes the unit of the entity's state and skips the
// message.
func statestreamUnit(d *Decoder, dst []buffer.Reading, payload []byte, device, _ string, _ time.Time) ([]buffer.Reading, int, error) {
	if unit, ok := jsonText(d, payload); ok && d.Units != nil {
		d.Units.Learn(device, "state", unit)
	}
	return dst, 0, &SkipError{Kind: SkipMeta, Detail: "unit_of_measurement"}
}

// statestreamAttribute reads a JSON-encoded attribute: a number, a
// boolean, or a string holding a value or a text (a climate's
// hvac_action "heating"), but for statestreamNotStates; anything else is
// ignored.
func statestreamAttribute(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if text, ok := jsonText(d, payload); ok {
		if statestreamNotStates([]byte(metric)) {
			return readText(d, dst, []byte(text), device, metric, recv)
		}
		return readState(d, dst, []byte(text), device, metric, recv)
	}
	start := skipSpace(payload, 0)
	if start < len(payload) && (payload[start] == '{' || payload[start] == '[') {
		return dst, 1, nil
	}
	if statestreamNotStates([]byte(metric)) {
		return readText(d, dst, payload, device, metric, recv)
	}
	return readState(d, dst, payload, device, metric, recv)
}

// jsonText returns the text of a payload that is one JSON string.
func jsonText(d *Decoder, payload []byte) (string, bool) {
	p := jsonParser{d: d, s: payload, i: skipSpace(payload, 0)}
	if p.peek() != '"' {
		return "", false
	}
	s, e, esc, err := p.str()
	if err != nil {
		return "", false
	}
	if p.skipSpace(); p.i != len(payload) {
		return "", false
	}
	if esc {
		return string(unescape(nil, payload[s:e])), true
	}
	return string(payload[s:e]), true
}
