package payload

import "time"

// openMQTTGatewayPreset reads the BLE readings of OpenMQTTGateway
// (https://docs.openmqttgateway.com/use/ble.html) and Theengs Gateway,
// which share the format: BASE/GATEWAY/BTtoMQTT/MAC with the device's MAC,
// colons and all, in the payload's "id". The gateway's own system
// readings, SYStoMQTT, are readings of the gateway.
var openMQTTGatewayPreset = preset{
	// SYStoMQTT's memory, MQTT settings and receiver tuning; the
	// gateway's uptime, tempc and rssi stay.
	exclude: []string{"freemem", "freestack", "maxBlock", "mqttport", "mqttsecure", "actRec", "mhz", "RTL*"},
	name:    "openmqttgateway", base: "home",
	routes: []presetRoute{
		{pattern: "%base%/{device}/LWT", skip: SkipAvailability},
		{pattern: "%base%/+/commands/#", skip: SkipCommand},
		{pattern: "%base%/+/+/config", skip: SkipCommand},
		{pattern: "%base%/{device}/SYStoMQTT", read: readJSON(bleGateway)},
		{pattern: "%base%/+/BTtoMQTT/{device}", read: readJSON(bleJSON), payloadDevice: true},
	},
}

// bleUnits are the units of Theengs decoder properties by key.
var bleUnits = map[string]string{
	"rssi": "dBm", "tempc": "°C", "tempc2": "°C", "tempc3": "°C", "tempc4": "°C",
	"tempf": "°F", "tempf2": "°F", "hum": "%", "batt": "%", "volt": "V", "lux": "lx",
	"pres": "hPa", "moi": "%", "fer": "µS/cm", "co2": "ppm", "pm25": "µg/m³",
	"pm10": "µg/m³", "weight": "kg", "impedance": "Ω", "uptime": "s", "freemem": "B",
	"distance": "m",
}

// bleEnvelope are the fields of a BLE message that describe the device
// rather than measure anything.
var bleEnvelope = []string{"id", "mac", "name", "brand", "model", "model_id", "type", "mac_type",
	"adv_type", "cidc", "acts", "cont", "track", "servicedata", "servicedatauuid",
	"manufacturerdata", "uuid", "txpower"}

// bleGateway reads the gateway's own system readings; its texts (version,
// addresses, module names) are no states.
func bleGateway(r *docReader, device, _ string, recv time.Time) {
	r.notState = noStates
	r.readAll("", device, recv.UnixNano(), func(name []byte) string { return keyUnit(bleUnits, name) })
}

// bleJSON reads a device's readings; its id is the device. Its texts are
// ids and raw advertising data, no states.
func bleJSON(r *docReader, device, _ string, recv time.Time) {
	r.notState = noStates
	doc := &r.d.doc
	if id := doc.find("id"); id != nil && id.kind == leafString {
		device = r.device(id)
	}
	for _, k := range bleEnvelope {
		if l := doc.find(k); l != nil {
			l.used = true
		}
	}
	r.readAll("", device, recv.UnixNano(), func(name []byte) string { return keyUnit(bleUnits, name) })
}
