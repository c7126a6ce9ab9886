package payload

import (
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
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
		{pattern: "{device}/events/rpc", read: readJSON(shellyNotify)},
		{pattern: "{device}/status/{metric}", read: readJSON(shellyStatus)},
	},
}

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

// shellyNotify reads a JSON-RPC notification: NotifyStatus and
// NotifyFullStatus carry readings, other methods (NotifyEvent) do not.
func shellyNotify(r *docReader, device, _ string, recv time.Time) {
	doc := &r.d.doc
	method := doc.find("method")
	if method == nil || method.kind != leafString || (string(doc.str(method)) != "NotifyStatus" && string(doc.str(method)) != "NotifyFullStatus") {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "a notification without status"}
		return
	}
	ts := r.time(doc.find("params.ts"), TimeFormat{kind: timeUnit, layout: "s"}, recv)
	doc.dropKeys(shellyEnvelope...)
	r.readAll("params", device, ts, func(name []byte) string { return keyUnit(shellyRPCUnits, name) })
}

// shellyStatus reads a generic status update of the component {metric}.
func shellyStatus(r *docReader, device, component string, recv time.Time) {
	r.d.doc.dropKeys(shellyEnvelope...)
	r.readAllAs("", component, device, recv.UnixNano(), func(name []byte) string { return keyUnit(shellyRPCUnits, name) })
}
