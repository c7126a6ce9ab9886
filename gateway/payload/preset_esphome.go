package payload

import (
	"slices"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// esphomePreset reads ESPHome's MQTT component
// (https://esphome.io/components/mqtt.html): states on
// NODE/COMPONENT/NAME/state, plain (a sensor's number, a binary sensor's
// ON/OFF) or JSON (a light's). Units come from the node's Home Assistant
// discovery messages, which are skipped after their unit is noted.
var esphomePreset = preset{
	name: "esphome",
	routes: []presetRoute{
		{pattern: "homeassistant/#", read: esphomeDiscovery},
		{pattern: "{device}/status", skip: SkipAvailability},
		{pattern: "{device}/debug", skip: SkipMeta},
		{pattern: "{device}/+/+/command", skip: SkipCommand},
		{pattern: "{device}/+/+/+/command", skip: SkipCommand},
		{pattern: "{device}/select/{metric}/state", read: esphomeState, texts: allTexts},
		{pattern: "{device}/text_sensor/{metric}/state", read: esphomeState, texts: allTexts},
		{pattern: "{device}/climate/{metric}/{metric}/state", read: esphomeState, texts: esphomeClimateTexts},
		{pattern: "{device}/+/{metric}/state", read: esphomeState},
		{pattern: "{device}/+/{metric}/{metric}/state", read: esphomeState}, // climate/NAME/current_temperature
	},
}

// esphomeClimateTexts are a climate's modes
// (https://esphome.io/components/climate/index.html#climate-mqtt-options:
// mode off, heat_cool, cool, heat…; action off, heating, idle…; fan_mode
// on, off, auto…; swing_mode off, both…; preset).
var esphomeClimateTexts = textsOf("*.mode", "*.action", "*.fan_mode", "*.swing_mode", "*.preset")

// esphomeState reads a component's state: JSON (a light, a fan) as
// NAME.field, anything else as a plain value; text that is not a value (a
// text sensor's, a select's option, a climate's mode) is a text reading,
// but for a date and time.
func esphomeState(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if start := skipSpace(payload, 0); start < len(payload) && payload[start] == '{' {
		return esphomeJSON(d, dst, payload, device, metric, recv)
	}
	return readState(d, dst, payload, device, metric, recv)
}

// esphomeJSON reads a JSON state as NAME.field.
var esphomeJSON = readJSON(func(r *docReader, device, metric string, recv time.Time) {
	r.notState = onlyTimes
	r.readAllAs("", metric, device, recv.UnixNano(), nil)
})

// esphomeDiscovery notes the unit of a discovery config's state topic and
// skips the message.
func esphomeDiscovery(d *Decoder, dst []buffer.Reading, payload []byte, _, _ string, _ time.Time) ([]buffer.Reading, int, error) {
	skip := &SkipError{Kind: SkipDiscovery, Detail: "Home Assistant discovery"}
	if d.Units == nil || d.flatten(payload, skipSpace(payload, 0)) != nil {
		return dst, 0, skip
	}
	doc := &d.doc
	text := func(full, abbr string) string {
		l := doc.find(full)
		if l == nil {
			l = doc.find(abbr)
		}
		if l == nil || l.kind != leafString {
			return ""
		}
		return string(doc.str(l))
	}
	unit, topic := text("unit_of_measurement", "unit_of_meas"), text("state_topic", "stat_t")
	if base := text("~", "~"); base != "" {
		if rest, ok := strings.CutPrefix(topic, "~"); ok {
			topic = base + rest
		} else if rest, ok := strings.CutSuffix(topic, "~"); ok {
			topic = rest + base
		}
	}
	if unit == "" || topic == "" {
		return dst, 0, skip
	}
	if device, metric, ok := esphomeStateTopic(topic); ok {
		d.Units.Learn(device, metric, unit)
	}
	return dst, 0, skip
}

// esphomeStateTopic returns the device and metric of a topic of
// esphomePreset's state routes, {device}/+/{metric}/state and
// {device}/+/{metric}/{metric}/state (the second metric level joined to
// the first with '.'), as their patterns capture them.
func esphomeStateTopic(topic string) (device, metric string, ok bool) {
	if topic == "" || topic[0] == '$' || strings.ContainsAny(topic, "+#\x00") {
		return "", "", false
	}
	l := strings.Split(topic, "/")
	if (len(l) != 4 && len(l) != 5) || l[len(l)-1] != "state" {
		return "", "", false
	}
	names := l[2 : len(l)-1]
	if l[0] == "" || slices.Contains(names, "") {
		return "", "", false
	}
	return l[0], strings.Join(names, "."), true
}
