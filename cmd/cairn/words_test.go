package main

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/cairn-gateway/cairn/gateway"
)

// wordsConfig reads Zigbee2MQTT and Home Assistant's statestream, and a
// topic of JSON documents whose mode is named a text by the route.
const wordsConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - preset: zigbee2mqtt
    - preset: homeassistant-statestream
    - pattern: "sensors/{device}/telemetry"
      texts: [mode]
http:
  listen: "127.0.0.1:0"
retention:
  raw_max_age: 0
`

// TestRun_ModesWithOff publishes modes whose states include off, on and
// open to a cairn run: a Zigbee2MQTT thermostat going heat, off, heat
// (https://www.zigbee2mqtt.io/devices/SLR2.html: system_mode off, auto,
// heat), a statestream climate that starts at off and a cover
// (https://developers.home-assistant.io/docs/core/entity/climate/#hvac-modes),
// and a route's texts: every reading is stored and read back as the
// text the device wrote, none refused; a plug's ON and OFF and a light's
// on stay numbers.
func TestRun_ModesWithOff(t *testing.T) {
	c := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), wordsConfig))
	pub := mustConnect(t, c.mqtt, "modes")
	type step struct{ topic, payload string }
	for _, s := range []step{
		{"zigbee2mqtt/boiler", `{"system_mode":"heat","running_state":"heat","local_temperature":19.5}`},
		{"zigbee2mqtt/boiler", `{"system_mode":"off","running_state":"idle","local_temperature":19.8}`},
		{"zigbee2mqtt/boiler", `{"system_mode":"heat","running_state":"heat","local_temperature":19.6}`},
		{"zigbee2mqtt/plug", `{"state":"ON","power":12}`},
		{"zigbee2mqtt/plug", `{"state":"OFF","power":0}`},
		{"homeassistant/climate/hallway/state", "off"},
		{"homeassistant/climate/hallway/state", "heat"},
		{"homeassistant/climate/hallway/state", "off"},
		{"homeassistant/cover/garage/state", "open"},
		{"homeassistant/cover/garage/state", "closing"},
		{"homeassistant/cover/garage/state", "closed"},
		{"homeassistant/light/desk/state", "on"},
		{"sensors/hall/telemetry", `{"mode":"OFF"}`},
		{"sensors/hall/telemetry", `{"mode":"eco"}`},
		{"sensors/hall/telemetry", `{"mode":"on"}`},
	} {
		if err := publish1(pub, s.topic, s.payload); err != nil {
			t.Fatal(err)
		}
	}
	api := newAPIClient(c.http)
	texts := func(device, metric string) []string {
		t.Helper()
		var got struct {
			Readings []struct {
				Text  *string  `json:"text"`
				Value *float64 `json:"value"`
			} `json:"readings"`
		}
		path := "/v1/devices/" + url.PathEscape(device) + "/readings?order=asc&metric=" + url.QueryEscape(metric)
		if code := api.get(t, path, &got); code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		var out []string
		for _, r := range got.Readings {
			switch {
			case r.Text != nil && r.Value == nil:
				out = append(out, *r.Text)
			case r.Value != nil && r.Text == nil:
				out = append(out, "="+strconv.FormatFloat(*r.Value, 'g', -1, 64))
			default:
				t.Errorf("GET %s: a reading with text %v and value %v", path, r.Text, r.Value)
			}
		}
		return out
	}
	for _, tc := range []struct {
		device, metric string
		want           []string
	}{
		{"boiler", "system_mode", []string{"heat", "off", "heat"}},
		{"boiler", "running_state", []string{"heat", "idle", "heat"}},
		{"plug", "state", []string{"=1", "=0"}},
		{"climate.hallway", "state", []string{"off", "heat", "off"}},
		{"cover.garage", "state", []string{"open", "closing", "closed"}},
		{"light.desk", "state", []string{"=1"}},
		{"hall", "mode", []string{"OFF", "eco", "on"}},
	} {
		if got := texts(tc.device, tc.metric); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.device, tc.metric, got, tc.want)
		}
	}
	var st struct {
		Ingest gateway.IngestStats `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", code)
	}
	if in := st.Ingest; in.WrongKind != 0 || len(in.ByReason) != 0 || in.Stored != 23 {
		t.Errorf("ingest: stored %d, wrong kind %d, rejected %v; want 23 stored, none refused", in.Stored, in.WrongKind, in.ByReason)
	}
	if t.Failed() {
		t.Logf("cairn log:\n%s", c.out)
	}
}
