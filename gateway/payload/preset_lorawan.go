package payload

import "time"

// ttnPreset reads uplinks of The Things Stack v3
// (https://www.thethingsindustries.com/docs/integrations/mqtt/): the
// fields of uplink_message.decoded_payload, which the application's
// payload formatter makes, are the readings, at received_at. The rest of
// the envelope (radio metadata, counters) is not.
var ttnPreset = preset{
	name: "ttn", base: "v3",
	routes: []presetRoute{
		{pattern: "%base%/+/devices/{device}/up", read: readJSON(ttnUplink)},
		{pattern: "%base%/+/devices/+/#", skip: SkipMeta},
	},
}

func ttnUplink(r *docReader, device, _ string, recv time.Time) {
	doc := &r.d.doc
	const payload = "uplink_message.decoded_payload"
	if !doc.has(payload) {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "an uplink without decoded_payload"}
		return
	}
	tl := doc.find("received_at")
	if tl == nil {
		tl = doc.find("uplink_message.received_at")
	}
	r.notState = lorawanNotStates
	r.readAll(payload, device, r.time(tl, TimeFormat{}, recv), nil)
}

// lorawanNotStates are the texts of a codec's output that label a value
// rather than say a state (Decentlab's {"displayName":…,"unit":…,
// "value":…}); its other texts are states ("open", "motion"), but for
// dates and times.
var lorawanNotStates = notStates("displayName", "*.displayName", "name", "*.name", "label", "*.label", "description", "*.description")

// chirpstackPreset reads ChirpStack v4's MQTT integration
// (https://www.chirpstack.io/docs/chirpstack/integrations/events.html):
// the fields of an up event's object, which the device profile's codec
// makes, at its time; the battery level and link margin of a status event.
var chirpstackPreset = preset{
	name: "chirpstack", base: "application",
	routes: []presetRoute{
		{pattern: "%base%/+/device/{device}/event/up", read: readJSON(chirpstackUp)},
		{pattern: "%base%/+/device/{device}/event/status", read: readJSON(chirpstackStatus)},
		{pattern: "%base%/+/device/+/event/+", skip: SkipMeta},
		{pattern: "%base%/+/device/+/command/#", skip: SkipCommand},
	},
}

func chirpstackUp(r *docReader, device, _ string, recv time.Time) {
	doc := &r.d.doc
	if !doc.has("object") {
		r.skip = &SkipError{Kind: SkipMeta, Detail: "an uplink without object"}
		return
	}
	r.notState = lorawanNotStates
	r.readAll("object", device, r.time(doc.find("time"), TimeFormat{}, recv), nil)
}

func chirpstackStatus(r *docReader, device, _ string, recv time.Time) {
	doc := &r.d.doc
	ts := r.time(doc.find("time"), TimeFormat{}, recv)
	var name []byte
	for _, f := range []struct{ key, unit string }{{"margin", "dB"}, {"batteryLevel", "%"}} {
		if l := doc.find(f.key); l != nil {
			name = append(name[:0], f.key...)
			r.emit(l, device, name, ts, f.unit)
		}
	}
}
