package payload

import (
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// shellyPreset reads Shelly's first generation
// (https://shelly-api-docs.shelly.cloud/gen1/#mqtt-support): one plain
// value per topic, BASE/DEVICE/relay/0/power and so on, named by the
// levels after the device joined with '.'. Energy counters come in watt
// minutes and are stored in watt hours.
var shellyPreset = preset{
	name: "shelly", base: "shellies",
	routes: []presetRoute{
		{pattern: "%base%/announce", skip: SkipMeta},
		{pattern: "%base%/command", skip: SkipCommand},
		{pattern: "%base%/{device}/online", skip: SkipAvailability},
		{pattern: "%base%/{device}/announce", skip: SkipMeta},
		{pattern: "%base%/{device}/info", skip: SkipMeta},
		{pattern: "%base%/{device}/command", skip: SkipCommand},
		{pattern: "%base%/{device}/{metric+}", read: shellyValue},
	},
}

// shellyUnits are the units of Shelly gen 1 topics by last level.
var shellyUnits = map[string]string{
	"power": "W", "energy": "Wh", "returned_energy": "Wh", "total": "Wh", "total_returned": "Wh",
	"voltage": "V", "current": "A", "reactive_power": "var", "temperature": "°C",
	"temperature_f": "°F", "humidity": "%", "battery": "%", "lux": "lx", "pos": "%",
}

// shellyValue reads one value; a topic that ends in command or set is a
// command.
func shellyValue(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if strings.HasSuffix(metric, ".command") || strings.HasSuffix(metric, ".set") || strings.Contains(metric, ".command.") {
		return dst, 0, &SkipError{Kind: SkipCommand, Detail: "a command"}
	}
	if strings.HasPrefix(metric, "input_event.") {
		return shellyInputEvent(d, dst, payload, device, metric, recv)
	}
	if string(payload) == "close" { // a door/window sensor's state: open or close
		payload = []byte("closed")
	}
	out, ignored, err := readText(d, dst, payload, device, metric, recv)
	for i := len(dst); i < len(out); i++ {
		name := []byte(out[i].Metric)
		out[i].Unit = keyUnit(shellyUnits, name)
		if hasKey(name, "energy") || hasKey(name, "returned_energy") {
			out[i].Value /= 60 // watt minutes
		}
	}
	return out, ignored, err
}

// shellyInputEvent reads an input's event, {"event":"S","event_cnt":2} on
// shellies/DEVICE/input_event/0: input_event.0.event is a text reading
// (S, L, SS, SSS, LS, SL: short, long and multiple pushes) and
// input_event.0.event_cnt a number. The plain texts of the other topics
// (a relay's "overpower", a roller's "stop") stay ignored: their series
// are numbers.
var shellyInputEvent = readJSON(func(r *docReader, device, metric string, recv time.Time) {
	r.notState = onlyTimes
	r.readAllAs("", metric, device, recv.UnixNano(), nil)
})

// shellyRPCPreset reads Shelly's second and third generations
// (https://shelly-api-docs.shelly.cloud/gen2/General/RPCChannels#mqtt):
// NotifyStatus and NotifyFullStatus on DEVICE/events/rpc, and the
// generic status updates on DEVICE/status/COMPONENT. Readings are named
// COMPONENT.field ("switch:0.apower").
var shellyRPCPreset = preset{
	// sys's memory, file system and configuration revisions, and the
	// MQTT connection the message itself came over; sys.uptime, wifi.rssi
	// and cloud.connected stay.
	exclude: []string{"sys.ram_*", "sys.fs_*", "sys.*_rev", "sys.restart_required", "mqtt.connected"},
	name:    "shelly-rpc",
	routes: []presetRoute{
		{pattern: "{device}/online", skip: SkipAvailability},
		{pattern: "{device}/rpc", skip: SkipCommand},
		{pattern: "{device}/command", skip: SkipCommand},
		{pattern: "{device}/command/#", skip: SkipCommand},
		{pattern: "{device}/debug/#", skip: SkipMeta},
		{pattern: "{device}/announce", skip: SkipMeta},
		{pattern: "{device}/events/rpc", read: readJSON(shellyNotify), texts: shellyRPCTexts},
		{pattern: "{device}/status/{metric}", read: readJSON(shellyStatus), texts: shellyRPCTexts},
	},
}

// shellyRPCTexts: a cover's state is a text, open, closed, opening,
// closing, stopped or calibrating
// (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Cover#status).
var shellyRPCTexts = textsOf("cover:*.state")

// shellyRPCUnits are the units of Shelly gen 2 status fields by key.
var shellyRPCUnits = map[string]string{
	"apower": "W", "voltage": "V", "current": "A", "freq": "Hz", "aenergy.total": "Wh",
	"ret_aenergy.total": "Wh", "tC": "°C", "tF": "°F", "rh": "%", "battery.V": "V",
	"battery.percent": "%", "act_power": "W", "aprt_power": "VA",
	"a_act_power": "W", "b_act_power": "W", "c_act_power": "W", "total_act_power": "W",
	"a_aprt_power": "VA", "b_aprt_power": "VA", "c_aprt_power": "VA", "total_aprt_power": "VA",
	"a_voltage": "V", "b_voltage": "V", "c_voltage": "V",
	"a_current": "A", "b_current": "A", "c_current": "A", "n_current": "A", "total_current": "A",
	"a_freq": "Hz", "b_freq": "Hz", "c_freq": "Hz", "lux": "lx", "rssi": "dBm",
	"total_act_energy": "Wh", "total_act_ret_energy": "Wh", "uptime": "s",
}

// shellyEnvelope are the fields of a component's status that are not
// readings.
var shellyEnvelope = []string{"id", "source", "minute_ts"}

// shellyRPCNotStates are the text fields of a status that are no state:
// addresses, names, versions and ids, times, and the updates on offer.
var shellyRPCNotStates = notStates("*mac", "*ip", "*_ip", "*ssid", "*.time", "*.name", "*ver", "*version*", "*fw_id",
	"*.id", "*.src", "*.uri", "*.url", "*available_updates.*", "*.errors")

// shellyNotify reads a JSON-RPC notification: NotifyStatus and
// NotifyFullStatus carry readings, NotifyEvent the events of inputs
// (shellyEvents); other methods, and other events, do not.
func shellyNotify(r *docReader, device, _ string, recv time.Time) {
	doc := &r.d.doc
	method := doc.find("method")
	if method != nil && method.kind == leafString && string(doc.str(method)) == "NotifyEvent" {
		shellyEvents(r, device, recv)
		return
	}
	if method == nil || method.kind != leafString || (string(doc.str(method)) != "NotifyStatus" && string(doc.str(method)) != "NotifyFullStatus") {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "a notification without status"}
		return
	}
	r.notState = shellyRPCNotStates
	ts := r.time(doc.find("params.ts"), TimeFormat{kind: timeUnit, layout: "s"}, recv)
	doc.dropKeys(shellyEnvelope...)
	r.readAll("params", device, ts, func(name []byte) string { return keyUnit(shellyRPCUnits, name) })
}

// shellyEvents reads the events of a NotifyEvent
// (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Input#notifications):
// each event of an input ("input:0": btn_down, btn_up, single_push,
// double_push, triple_push, long_push) is a text reading named
// COMPONENT.event ("input:0.event") at the event's ts, else the
// notification's. A notification with no input event (a component's
// config_changed) is skipped as meta.
func shellyEvents(r *docReader, device string, recv time.Time) {
	doc := &r.d.doc
	events := doc.find("params.events")
	ts := r.time(doc.find("params.ts"), TimeFormat{kind: timeUnit, layout: "s"}, recv)
	if events == nil || events.kind != leafArray || r.err != nil {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "a notification without events"}
		return
	}
	p := jsonParser{d: r.d, s: doc.str(events)}
	if p.peek() != '[' || p.enter(']') {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "a notification without events"}
		return
	}
	for {
		if p.peek() == '{' {
			if err := shellyEvent(r, &p, device, ts, recv); err != nil {
				r.fail(err)
				return
			}
		} else if err := p.value(2); err != nil {
			r.fail(err)
			return
		}
		if more, err := p.next(']'); !more || err != nil {
			r.fail(err)
			break
		}
	}
	if len(r.out) == r.first && len(r.d.dropped) == 0 && r.err == nil {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "a notification without input events"}
	}
}

// shellyEvent reads the event object at p.i (see shellyEvents).
func shellyEvent(r *docReader, p *jsonParser, device string, ts int64, recv time.Time) *RejectError {
	d := r.d
	d.name, d.vtext = d.name[:0], d.vtext[:0]
	event := false
	if !p.enter('}') {
		for {
			ks, ke, _, err := p.key()
			if err != nil {
				return err
			}
			key := string(p.s[ks:ke])
			switch c := p.peek(); {
			case (key == "component" || key == "event") && c == '"':
				s, e, esc, err := p.str()
				if err != nil {
					return err
				}
				b := p.s[s:e]
				if esc {
					d.str = unescape(d.str[:0], b)
					b = d.str
				}
				if key == "component" {
					d.name = append(d.name[:0], b...)
				} else {
					d.vtext, event = append(d.vtext[:0], b...), true
				}
			case key == "ts" && (c == '-' || isDigit(c)):
				n, _, err := p.number()
				if err != nil {
					return err
				}
				if ns, prob := epochIn(n, "s"); prob == "" {
					ts = d.restamp(ns, recv)
				}
			default:
				if err := p.value(3); err != nil {
					return err
				}
			}
			more, err := p.next('}')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	if !event || !strings.HasPrefix(string(d.name), "input:") {
		return nil
	}
	d.name = append(d.name, ".event"...)
	if prob := encoding.CheckName(d.name, encoding.MaxMetricLen); prob != "" {
		return rejectf(ReasonBadMetric, "metric %s: %s", quote(d.name), prob)
	}
	metric := d.intern(d.name)
	if _, kind, _ := parseText(d.vtext); kind != textOther {
		r.ignored++
		return nil
	}
	if rd, ok := d.textReading(device, metric, ts, d.vtext); ok {
		r.out = append(r.out, rd)
	}
	return nil
}

// shellyStatus reads a generic status update of the component {metric}.
func shellyStatus(r *docReader, device, component string, recv time.Time) {
	r.notState = shellyRPCNotStates
	r.d.doc.dropKeys(shellyEnvelope...)
	r.readAllAs("", component, device, recv.UnixNano(), func(name []byte) string { return keyUnit(shellyRPCUnits, name) })
}
