package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// TestRun_PresetMetrics runs the cairn binary with a Tasmota preset on its
// default excludes, a Zigbee2MQTT preset that keeps fields by an include,
// and a
// Telegraf preset whose device is the source tag: a STATE message makes
// only the series worth keeping, the fields dropped are counted as
// ignored, and the Modbus line is stored under its source.
func TestRun_PresetMetrics(t *testing.T) {
	var state testkit.Fixture
	for _, fx := range testkit.LoadFixtures(t, filepath.Join("..", "..", "gateway", "payload", "testdata", "presets")) {
		if fx.Name == "tasmota-state-epoch.txt" {
			state = fx
		}
	}
	cfg := writeConfig(t, t.TempDir(), `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - preset: tasmota
    - preset: zigbee2mqtt
      metrics: {include: ["update.*", "temperature"]}
    - preset: telegraf
      device_tag: source
http:
  listen: "127.0.0.1:0"
retention:
  raw_max_age: 0
`)
	d := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "preset-metrics")
	for _, m := range []struct{ topic, payload string }{
		{state.Topic, string(state.Payload)},
		{"telegraf/gw1/modbus", "modbus,host=gw1,source=meter1,slave=2 voltage=230.5 1676522982000000000\n"},
	} {
		if err := publish1(pub, m.topic, m.payload); err != nil {
			t.Fatalf("%s: %v", m.topic, err)
		}
	}

	metrics := func(device string) []string {
		var rd readingsDoc
		if code := api.get(t, "/v1/devices/"+device+"/readings?order=asc&limit=100", &rd); code != http.StatusOK {
			t.Fatalf("readings of %s: %d", device, code)
		}
		var names []string
		for _, r := range rd.Readings {
			names = append(names, r.Metric)
		}
		slices.Sort(names)
		return names
	}
	if got, want := metrics("tasmota"), []string{"UptimeSec", "Wifi.RSSI"}; !slices.Equal(got, want) {
		t.Errorf("tasmota STATE with the default excludes: got %v, want %v", got, want)
	}
	if got, want := metrics("meter1"), []string{"modbus.voltage{slave=2}"}; !slices.Equal(got, want) {
		t.Errorf("telegraf with device_tag source: got %v, want %v", got, want)
	}
	if code := api.get(t, "/v1/devices/gw1/readings", nil); code != http.StatusNotFound {
		t.Errorf("readings of the telegraf host gw1: %d, want 404", code)
	}
	var st struct {
		Ingest gateway.IngestStats `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	// 5 fields that are not readings (Uptime, SleepMode, ...) and 9 dropped.
	if got := st.Ingest.Ignored; got != 5+9 {
		t.Errorf("ignored fields: got %d, want 14", got)
	}

	// An include keeps what it names, the default excludes included, and
	// drops the rest.
	if err := publish1(pub, "zigbee2mqtt/remote", `{"temperature":21,"battery":90,"update":{"installed_version":1,"latest_version":2}}`); err != nil {
		t.Fatal(err)
	}
	if got, want := metrics("remote"), []string{"temperature", "update.installed_version", "update.latest_version"}; !slices.Equal(got, want) {
		t.Errorf("zigbee2mqtt with an include: got %v, want %v", got, want)
	}
}

// TestRun_PatternMetrics runs the cairn binary with metrics on pattern
// entries, a mapping's and a line protocol topic's: the fields they drop
// are not stored and are counted as ignored fields, as a preset's are.
func TestRun_PatternMetrics(t *testing.T) {
	cfg := writeConfig(t, t.TempDir(), `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - pattern: "meters/{device}"
      strip_prefix: data
      metrics: {exclude: ["rssi", "wifi.*"]}
    - pattern: "lines/{device}"
      format: influx
      metrics: {include: ["env.temp"]}
http:
  listen: "127.0.0.1:0"
retention:
  raw_max_age: 0
`)
	d := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "pattern-metrics")
	for _, m := range []struct{ topic, payload string }{
		{"meters/m1", `{"seq":5,"data":{"t":21.5,"rssi":-60,"wifi":{"ch":6,"ap":1}}}`},
		{"lines/l1", "env temp=20.5,hum=40i,rssi=-70i\n"},
	} {
		if err := publish1(pub, m.topic, m.payload); err != nil {
			t.Fatalf("%s: %v", m.topic, err)
		}
	}
	for device, want := range map[string][]string{"m1": {"t"}, "l1": {"env.temp"}} {
		var rd readingsDoc
		if code := api.get(t, "/v1/devices/"+device+"/readings?order=asc&limit=100", &rd); code != http.StatusOK {
			t.Fatalf("readings of %s: %d", device, code)
		}
		var got []string
		for _, r := range rd.Readings {
			got = append(got, r.Metric)
		}
		if !slices.Equal(got, want) {
			t.Errorf("metrics of %s: got %v, want %v", device, got, want)
		}
	}
	var st struct {
		Ingest gateway.IngestStats `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	// rssi, wifi.ch and wifi.ap of the mapping; hum and rssi of the line.
	if got := st.Ingest.Ignored; got != 3+2 {
		t.Errorf("ignored fields: got %d, want 5", got)
	}
}
