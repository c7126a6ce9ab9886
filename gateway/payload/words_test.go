package payload

import (
	"reflect"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// wd is a number reading read from the state word word.
func wd(device, metric string, ts int64, v float64, word string) buffer.Reading {
	r := rd(device, metric, ts, v)
	r.Word = word
	return r
}

// TestDecode_Words: a number read from a state word or a boolean keeps
// its word, as the device wrote it, in every format; a number has none.
func TestDecode_Words(t *testing.T) {
	for _, tc := range []struct {
		format  Format
		payload string
		want    []buffer.Reading
	}{
		{FormatValue, " OFF\n", []buffer.Reading{wd("d", "m", recvNS, 0, "OFF")}},
		{FormatValue, "on", []buffer.Reading{wd("d", "m", recvNS, 1, "on")}},
		{FormatValue, "Closed", []buffer.Reading{wd("d", "m", recvNS, 0, "Closed")}},
		{FormatValue, "oFf", []buffer.Reading{wd("d", "m", recvNS, 0, "off")}}, // no usual spelling: lower case
		{FormatValue, "21.5", []buffer.Reading{rd("d", "m", recvNS, 21.5)}},
		{FormatJSON, `{"system_mode":"off","state":"ON","contact":true,"occupancy":false,"t":"1","w":"OPEN"}`, []buffer.Reading{
			wd("d", "system_mode", recvNS, 0, "off"), wd("d", "state", recvNS, 1, "ON"), wd("d", "contact", recvNS, 1, "true"),
			wd("d", "occupancy", recvNS, 0, "false"), rd("d", "t", recvNS, 1), wd("d", "w", recvNS, 1, "OPEN")}},
		{FormatSenML, `[{"bn":"d:","n":"mode","vs":"Off"},{"n":"relay","vb":true},{"n":"t","v":1}]`, []buffer.Reading{
			wd("d", "mode", recvNS, 0, "Off"), wd("d", "relay", recvNS, 1, "true"), rd("d", "t", recvNS, 1)}},
		{FormatInflux, `hvac mode="off",fan="True",heater=t,n=1i`, []buffer.Reading{
			wd("d", "hvac.mode", recvNS, 0, "off"), wd("d", "hvac.fan", recvNS, 1, "True"), wd("d", "hvac.heater", recvNS, 1, "true"),
			rd("d", "hvac.n", recvNS, 1)}},
	} {
		var d Decoder
		got, _, err := d.Decode(nil, tc.format, []byte(tc.payload), "d", "m", testRecv)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Decode(%v, %q)\n got %+v, %v\nwant %+v", tc.format, tc.payload, got, err, tc.want)
		}
	}
}

// TestDecode_WordsAllocs: the word costs a number no allocation.
func TestDecode_WordsAllocs(t *testing.T) {
	var d Decoder
	payload := []byte(`{"state":"ON","system_mode":"Off","contact":true,"w":"closed"}`)
	dst := make([]buffer.Reading, 0, 8)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, _, err := d.Decode(dst, FormatJSON, payload, "dev1", "", testRecv); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("Decode allocates %v times per message of words, want 0", allocs)
	}
}

// TestDecodeRoute_Texts: a route's texts make the state words of their
// metrics texts, as written; other words stay numbers with their word.
func TestDecodeRoute_Texts(t *testing.T) {
	r := Route{Format: FormatAuto, Texts: []string{"system_mode", "*.mode"}}
	for _, tc := range []struct {
		payload, metric string
		want            []buffer.Reading
	}{
		{`{"system_mode":"off","state":"ON","fan":{"mode":"On"},"t":21}`, "", []buffer.Reading{
			txt("d", "system_mode", recvNS, "off"), wd("d", "state", recvNS, 1, "ON"), txt("d", "fan.mode", recvNS, "On"),
			rd("d", "t", recvNS, 21)}},
		{`{"system_mode":"heat"}`, "", []buffer.Reading{txt("d", "system_mode", recvNS, "heat")}},
		{"OFF", "system_mode", []buffer.Reading{txt("d", "system_mode", recvNS, "OFF")}},
		{"OFF", "relay", []buffer.Reading{wd("d", "relay", recvNS, 0, "OFF")}},
		{"1", "system_mode", []buffer.Reading{rd("d", "system_mode", recvNS, 1)}}, // a number stays one
	} {
		var d Decoder
		got, _, err := d.DecodeRoute(nil, &r, []byte(tc.payload), "d", tc.metric, testRecv)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DecodeRoute(%q)\n got %+v, %v\nwant %+v", tc.payload, got, err, tc.want)
		}
	}
	for _, bad := range [][]string{{""}, {"a["}} {
		if CheckTexts(bad) == nil {
			t.Errorf("CheckTexts(%q) = nil, want an error", bad)
		}
	}
	if err := CheckTexts([]string{"system_mode", "*.mode", "cover:*.state"}); err != nil {
		t.Errorf("CheckTexts: %v", err)
	}
}

// TestPresets_Texts: the fields a preset knows as modes or states give
// their state words as texts; booleans of the same family stay numbers.
func TestPresets_Texts(t *testing.T) {
	for _, tc := range []struct {
		preset, topic, payload string
		want                   []buffer.Reading
	}{
		// https://www.zigbee2mqtt.io/devices/SLR2.html: system_mode off, auto, heat, with the endpoint's suffix.
		{"zigbee2mqtt", "zigbee2mqtt/boiler", `{"system_mode_heat":"off","running_state_heat":"idle","temperature_setpoint_hold_heat":false}`, []buffer.Reading{
			txt("boiler", "system_mode_heat", recvNS, "off"), txt("boiler", "running_state_heat", recvNS, "idle"),
			wd("boiler", "temperature_setpoint_hold_heat", recvNS, 0, "false")}},
		{"zigbee2mqtt", "zigbee2mqtt/plug", `{"state":"OFF","power_on_behavior":"previous","contact":true}`, []buffer.Reading{
			wd("plug", "state", recvNS, 0, "OFF"), txt("plug", "power_on_behavior", recvNS, "previous"), wd("plug", "contact", recvNS, 1, "true")}},
		{"zigbee2mqtt", "zigbee2mqtt/plug", `{"power_on_behavior":"off"}`, []buffer.Reading{txt("plug", "power_on_behavior", recvNS, "off")}},
		{"homeassistant-statestream", "homeassistant/climate/hall/state", "off", []buffer.Reading{txt("climate.hall", "state", recvNS, "off")}},
		{"homeassistant-statestream", "homeassistant/water_heater/boiler/state", "off", []buffer.Reading{txt("water_heater.boiler", "state", recvNS, "off")}},
		{"homeassistant-statestream", "homeassistant/lock/front/state", "open", []buffer.Reading{txt("lock.front", "state", recvNS, "open")}},
		{"homeassistant-statestream", "homeassistant/climate/hall/hvac_action", `"off"`, []buffer.Reading{txt("climate.hall", "hvac_action", recvNS, "off")}},
		{"homeassistant-statestream", "homeassistant/light/desk/state", "on", []buffer.Reading{wd("light.desk", "state", recvNS, 1, "on")}},
		{"homeassistant-statestream", "homeassistant/binary_sensor/door/state", "off", []buffer.Reading{wd("binary_sensor.door", "state", recvNS, 0, "off")}},
		{"esphome", "livingroom/text_sensor/status/state", "ON", []buffer.Reading{txt("livingroom", "status", recvNS, "ON")}},
		{"esphome", "livingroom/climate/thermostat/fan_mode/state", "on", []buffer.Reading{txt("livingroom", "thermostat.fan_mode", recvNS, "on")}},
		{"esphome", "livingroom/climate/thermostat/current_temperature/state", "21.5", []buffer.Reading{rd("livingroom", "thermostat.current_temperature", recvNS, 21.5)}},
		{"esphome", "livingroom/binary_sensor/window/state", "OFF", []buffer.Reading{wd("livingroom", "window", recvNS, 0, "OFF")}},
		{"tasmota", "stat/t1/RESULT", `{"Switch1":{"Action":"OFF"}}`, []buffer.Reading{txt("t1", "Switch1.Action", recvNS, "OFF")}},
		{"tasmota", "stat/t1/POWER", "ON", []buffer.Reading{wd("t1", "POWER", recvNS, 1, "ON")}},
		// https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Cover#status: state open, closed, opening, ...
		{"shelly-rpc", "shellyplus2pm-1/status/cover:0", `{"id":0,"state":"open","current_pos":100}`, []buffer.Reading{
			txt("shellyplus2pm-1", "cover:0.state", recvNS, "open"), rd("shellyplus2pm-1", "cover:0.current_pos", recvNS, 100)}},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			r, device, metric := routeFor(t, testkit.Fixture{Name: tc.topic, Preset: tc.preset, Topic: tc.topic})
			all := *r
			all.Metrics = nil
			d := Decoder{Units: testUnits{}}
			got, _, err := d.DecodeRoute(nil, &all, []byte(tc.payload), device, metric, testRecv)
			for i := range got {
				got[i].Unit = "" // units are not what this tests
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// BenchmarkDecodeRoute_Zigbee2MQTTThermostat: a thermostat's state with
// its modes and a plug-like boolean, through the preset's route: state
// words become texts or keep their word.
func BenchmarkDecodeRoute_Zigbee2MQTTThermostat(b *testing.B) {
	routes, err := PresetRoutes("zigbee2mqtt", "", nil)
	if err != nil {
		b.Fatal(err)
	}
	r := &routes[len(routes)-1].Route // zigbee2mqtt/{device+}
	payload := []byte(`{"current_heating_setpoint":20,"local_temperature":21.5,"preset":"home","running_state":"idle","system_mode":"off","child_lock":"UNLOCK","window_detection":"OFF","linkquality":96}`)
	d := Decoder{Units: testUnits{}}
	dst := make([]buffer.Reading, 0, 16)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		out, _, err := d.DecodeRoute(dst, r, payload, "floor_heating", "", testRecv)
		if err != nil || len(out) != 8 || out[6].Word != "OFF" || out[4].Text != "off" {
			b.Fatalf("%+v, %v", out, err)
		}
	}
}
