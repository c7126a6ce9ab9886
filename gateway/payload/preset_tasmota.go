package payload

import (
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// tasmotaPreset reads Tasmota (https://tasmota.github.io/docs/MQTT/) with
// its default full topic %prefix%/%topic%/: telemetry on tele/DEVICE/SENSOR
// and STATE, sensor status on stat/DEVICE/STATUS10 (StatusSNS), relay
// states on stat/DEVICE/POWER and POWER1…. Times are local without an
// offset unless SetOption52 adds one; a sensor object with an "Id" (several
// DS18B20 on one pin) is a device of its own, DEVICE/ID.
var tasmotaPreset = preset{
	name: "tasmota", local: true,
	routes: []presetRoute{
		{pattern: "tele/{device}/LWT", skip: SkipAvailability},
		{pattern: "cmnd/#", skip: SkipCommand},
		{pattern: "tasmota/discovery/#", skip: SkipDiscovery},
		{pattern: "tele/{device}/SENSOR", read: readJSON(tasmotaJSON(""))},
		{pattern: "tele/{device}/STATE", read: readJSON(tasmotaJSON(""))},
		{pattern: "stat/{device}/STATUS10", read: readJSON(tasmotaJSON("StatusSNS"))},
		{pattern: "stat/{device}/STATUS8", read: readJSON(tasmotaJSON("StatusSNS"))},
		{pattern: "stat/{device}/{metric}", read: tasmotaStat, texts: tasmotaTexts},
		{pattern: "tele/{device}/+", skip: SkipMeta},
	},
	// STATE's firmware counters and radio details; UptimeSec, Wifi.RSSI
	// and Wifi.Signal stay.
	exclude: []string{"Heap", "Sleep", "LoadAvg", "MqttCount", "Wifi.AP", "Wifi.Channel",
		"Wifi.LinkCount", "Wifi.DeepSleep", "Wifi.Heap", "Berry.*"},
}

// tasmotaUnits are the units of Tasmota's fields by key.
var tasmotaUnits = map[string]string{
	"Humidity": "%", "Illuminance": "lx", "CarbonDioxide": "ppm", "eCO2": "ppm", "TVOC": "ppb",
	"PM1": "µg/m³", "PM2.5": "µg/m³", "PM10": "µg/m³",
}

// tasmotaFields are the units of Tasmota's fields by whole name.
var tasmotaFields = map[string]string{
	"ENERGY.Total": "kWh", "ENERGY.Yesterday": "kWh", "ENERGY.Today": "kWh", "ENERGY.Power": "W",
	"ENERGY.ApparentPower": "VA", "ENERGY.ReactivePower": "var", "ENERGY.Voltage": "V",
	"ENERGY.Current": "A", "ENERGY.Period": "Wh", "ENERGY.Frequency": "Hz",
	"UptimeSec": "s", "Heap": "kB", "Wifi.RSSI": "%", "Wifi.Signal": "dBm",
}

// tasmotaStat reads stat/DEVICE/POWER and POWERn, and the actions of
// buttons and switches on stat/DEVICE/RESULT (tasmotaResult); the other
// stat topics are command responses.
func tasmotaStat(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if metric == "RESULT" {
		return tasmotaResult(d, dst, payload, device, metric, recv)
	}
	if n, ok := strings.CutPrefix(metric, "POWER"); !ok || strings.Trim(n, "0123456789") != "" {
		return dst, 0, &SkipError{Kind: SkipMeta, Detail: "a command response"}
	}
	return d.decodeValue(dst, payload, skipSpace(payload, 0), device, metric, recv)
}

// tasmotaNotState: Tasmota's texts are diagnostics (uptime, Wi-Fi names
// and addresses, versions, sleep mode), no states, but for the Action of a
// button (SetOption73: "SINGLE", "DOUBLE", "HOLD") or of a switch
// (SetOption114: "ON", a number as ever).
func tasmotaNotState(name []byte) bool {
	_, key := splitLast(name)
	return string(key) != "Action"
}

// tasmotaResult reads a command's RESULT, which is a reading only when it
// holds the Action of a button or switch ({"Button1":{"Action":"SINGLE"}}
// gives Button1.Action "SINGLE"); any other RESULT is a command response,
// skipped as meta.
var tasmotaResult = readJSON(func(r *docReader, device, _ string, recv time.Time) {
	doc := &r.d.doc
	action := false
	for i := range doc.leaves {
		l := &doc.leaves[i]
		if tasmotaNotState(doc.name(l)) {
			l.used = true
		} else {
			action = true
		}
	}
	if !action {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "a command response"}
		return
	}
	r.notState = tasmotaNotState
	r.readAll("", device, recv.UnixNano(), nil)
})

// tasmotaJSON reads a SENSOR, STATE or STATUS message; prefix is the
// object the fields are in ("StatusSNS"), if any.
func tasmotaJSON(prefix string) func(r *docReader, device, metric string, recv time.Time) {
	key := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	return func(r *docReader, device, _ string, recv time.Time) {
		r.notState = tasmotaNotState
		doc := &r.d.doc
		tl := doc.find(key("Epoch"))
		if tl == nil {
			tl = doc.find(key("Time"))
		}
		ts := r.time(tl, TimeFormat{}, recv)
		for _, k := range []string{"Time", "Epoch", "TempUnit", "PressureUnit", "SpeedUnit", "ENERGY.TotalStartTime"} {
			if l := doc.find(key(k)); l != nil {
				l.used = true
			}
		}
		temp, pressure := "°C", "hPa"
		if u := doc.find(key("TempUnit")); u != nil && string(doc.str(u)) == "F" {
			temp = "°F"
		}
		if u := doc.find(key("PressureUnit")); u != nil && u.kind == leafString && len(doc.str(u)) > 0 {
			pressure = r.d.internUnit(doc.str(u))
		}
		unit := func(name []byte) string {
			if u, ok := tasmotaFields[string(name)]; ok {
				return u
			}
			switch {
			case hasKey(name, "Temperature"), hasKey(name, "DewPoint"):
				return temp
			case hasKey(name, "Pressure"), hasKey(name, "SeaPressure"):
				return pressure
			}
			return keyUnit(tasmotaUnits, name)
		}
		tasmotaSensors(r, prefixOf(prefix), device, ts, unit)
		r.readAll(prefix, device, ts, unit)
	}
}

// tasmotaSensors reads the sensor objects that have an Id (several DS18B20
// on one pin) as devices of their own, DEVICE/ID, so that a sensor keeps
// its series when another is added and the numbering changes. The leaves
// of one object are next to each other in the document.
func tasmotaSensors(r *docReader, pre, device string, ts int64, unit func([]byte) string) {
	doc := &r.d.doc
	var name []byte
	for i := 0; i < len(doc.leaves); {
		obj := sensorObject(doc.name(&doc.leaves[i]), pre)
		j := i + 1
		for obj != "" && j < len(doc.leaves) && sensorObject(doc.name(&doc.leaves[j]), pre) == obj {
			j++
		}
		var id *leaf
		for k := i; obj != "" && k < j; k++ {
			if l := &doc.leaves[k]; string(doc.name(l)) == pre+obj+".Id" && (l.kind == leafString || l.kind == leafNumber) && len(doc.str(l)) > 0 {
				id = l
			}
		}
		if id != nil {
			id.used = true
			sub := r.d.intern(append(append([]byte(device), '/'), doc.str(id)...))
			if prob := encoding.CheckDevice(sub); prob != "" {
				r.fail(rejectf(ReasonBadDevice, "device %s: %s", quote(sub), prob))
				return
			}
			for k := i; k < j; k++ {
				if l := &doc.leaves[k]; !l.used {
					name = append(name[:0], doc.name(l)[len(pre)+len(obj)+1:]...)
					r.emit(l, sub, name, ts, unit(name))
				}
			}
		}
		i = j
	}
}

// sensorObject returns the key of the object under pre that the leaf
// named n is in, or "" if it is not in one.
func sensorObject(n []byte, pre string) string {
	rest, ok := strings.CutPrefix(string(n), pre)
	if !ok {
		return ""
	}
	obj, _, nested := strings.Cut(rest, ".")
	if !nested {
		return ""
	}
	return obj
}

// prefixOf returns prefix and its '.', or "".
func prefixOf(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "."
}

// tasmotaTexts: a button's or switch's Action on RESULT is a text, SINGLE,
// DOUBLE, HOLD, or with SwitchMode ON, OFF, TOGGLE
// (https://tasmota.github.io/docs/Buttons-and-Switches/).
var tasmotaTexts = textsOf("*.Action")
