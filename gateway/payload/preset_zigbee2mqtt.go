package payload

import "time"

// zigbee2mqttPreset reads Zigbee2MQTT
// (https://www.zigbee2mqtt.io/guide/usage/mqtt_topics_and_messages.html):
// each device's state as JSON on BASE/FRIENDLY_NAME, where the friendly
// name may hold '/'. The bridge's own topics, availability and the /set
// and /get commands are skipped.
var zigbee2mqttPreset = preset{
	// The firmware update's versions and progress; linkquality stays.
	exclude: []string{"update.*", "update_available"},
	name:    "zigbee2mqtt", base: "zigbee2mqtt",
	routes: []presetRoute{
		{pattern: "%base%/bridge/#", skip: SkipBridge},
		{pattern: "%base%/{device+}/availability", skip: SkipAvailability},
		{pattern: "%base%/{device+}/set", skip: SkipCommand},
		{pattern: "%base%/{device+}/set/+", skip: SkipCommand},
		{pattern: "%base%/{device+}/get", skip: SkipCommand},
		{pattern: "%base%/{device+}/get/+", skip: SkipCommand},
		{pattern: "%base%/{device+}", read: readJSON(zigbee2mqttJSON), texts: zigbee2mqttTexts},
	},
}

// zigbee2mqttTexts are the fields whose values are modes or events, some
// of which are state words, as the device pages' exposes list them
// (https://www.zigbee2mqtt.io/devices/SLR2.html: system_mode off, auto,
// heat): a thermostat's system_mode, running_state, running_mode,
// preset and fan_mode; a switch's power_on_behavior (off, on, toggle,
// previous), power_outage_memory and indicator_mode; a backlight_mode;
// a remote's action (on, off, brightness_move_up). Each with an
// endpoint's suffix too (system_mode_heat, power_on_behavior_l1). A
// plug's state (ON, OFF) and a sensor's contact or occupancy (true,
// false) are booleans: numbers.
var zigbee2mqttTexts = textsOf("system_mode*", "running_state*", "running_mode*", "preset*", "fan_mode*",
	"power_on_behavior*", "power_outage_memory*", "indicator_mode*", "backlight_mode*", "action*")

// zigbee2mqttUnits are the units of Zigbee2MQTT's exposes by property.
var zigbee2mqttUnits = map[string]string{
	"temperature": "°C", "local_temperature": "°C", "device_temperature": "°C",
	"humidity": "%", "pressure": "hPa", "battery": "%",
	"linkquality": "lqi", "illuminance": "lx", "illuminance_lux": "lx",
	"power": "W", "energy": "kWh", "current": "A", "co2": "ppm", "voc": "ppb",
	"formaldehyd": "mg/m³", "pm25": "µg/m³", "pm10": "µg/m³", "soil_moisture": "%",
	"color_temp": "mired",
}

// zigbee2mqttNotStates are the text fields of a device's state that are
// no state: when it was last seen, the firmware update's versions and
// state, and the device information that include_device_information adds
// (its ids, model and vendor).
var zigbee2mqttNotStates = notStates("last_seen", "update.*", "update_available", "device.*", "*version*")

// zigbee2mqttJSON reads a device's state; last_seen, when the bridge
// sends it, is the time. Texts are states (system_mode "heat") and events
// (action "single"), but for zigbee2mqttNotStates.
func zigbee2mqttJSON(r *docReader, device, _ string, recv time.Time) {
	r.notState = zigbee2mqttNotStates
	doc := &r.d.doc
	ts := r.time(doc.find("last_seen"), TimeFormat{}, recv)
	r.readAll("", device, ts, func(name []byte) string { return keyUnit(zigbee2mqttUnits, name) })
}
