package gateway

import (
	"reflect"
	"slices"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// decodeFixture decodes a preset fixture's payload on its route with the
// route's Metrics replaced by m (nil: every field).
func decodeFixture(t *testing.T, fx testkit.Fixture, m *Metrics) ([]buffer.Reading, int, error) {
	t.Helper()
	r, device, metric := routeFor(t, fx)
	route := *r
	route.Metrics = m
	d := Decoder{units: &unitBook{}}
	return d.DecodeRoute(nil, &route, fx.Payload, device, metric, testRecv)
}

func metricNames(rs []buffer.Reading) []string {
	names := []string{}
	for _, r := range rs {
		names = append(names, r.Metric)
	}
	return names
}

// TestPresets_DefaultExcludes reads every preset fixture with its preset's
// default excludes: the diagnostic fields go, each counted as an ignored
// field, the others stay as they were, and the whole set makes fewer
// series.
func TestPresets_DefaultExcludes(t *testing.T) {
	kept := map[string][]string{
		"tasmota-state-epoch.txt":         {"UptimeSec", "Wifi.RSSI"},
		"tasmota-state-time-offset.txt":   {"UptimeSec", "POWER", "Wifi.RSSI", "Wifi.Signal"},
		"zigbee2mqtt-update-progress.txt": {},
		"shelly-rpc-notifyfullstatus-plusht.txt": {"cloud.connected", "sys.uptime", "wifi.rssi",
			"temperature:0.tC", "temperature:0.tF", "humidity:0.rh", "devicepower:0.battery.V",
			"devicepower:0.battery.percent", "devicepower:0.external.present"},
		"openmqttgateway-systomqtt.txt": {"uptime", "tempc", "rssi"},
	}
	seen := map[string]bool{}
	seriesAll, seriesDefault := map[string]bool{}, map[string]bool{}
	for _, fx := range presetFixtures(t) {
		if fx.Skip != "" || fx.Reject != "" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			r, _, _ := routeFor(t, fx)
			all, ignoredAll, err := decodeFixture(t, fx, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, ignored, err := decodeFixture(t, fx, r.Metrics)
			if err != nil {
				t.Fatal(err)
			}
			for _, rd := range all {
				seriesAll[rd.Device+"\x00"+rd.Metric] = true
			}
			for _, rd := range got {
				seriesDefault[rd.Device+"\x00"+rd.Metric] = true
			}
			if want, ok := kept[fx.Name]; ok {
				seen[fx.Name] = true
				if names := metricNames(got); !slices.Equal(names, want) {
					t.Errorf("with the defaults: got %v, want %v", names, want)
				}
			}
			// The readings kept are those of the full read, in order.
			var rest []buffer.Reading
			for _, rd := range all {
				if slices.ContainsFunc(got, func(g buffer.Reading) bool { return reflect.DeepEqual(g, rd) }) {
					rest = append(rest, rd)
				}
			}
			if len(rest) != len(got) {
				t.Errorf("with the defaults: %s is not a part of %s", showReadings(got), showReadings(all))
			}
			if dropped := len(all) - len(got); ignored != ignoredAll+dropped {
				t.Errorf("ignored %d, want %d and the %d dropped", ignored, ignoredAll, dropped)
			}
		})
	}
	for name := range kept {
		if !seen[name] {
			t.Errorf("no fixture %s", name)
		}
	}
	if len(seriesDefault) >= len(seriesAll) {
		t.Errorf("the fixtures make %d series with the defaults, %d without: want fewer", len(seriesDefault), len(seriesAll))
	}
	t.Logf("preset fixtures: %d series, %d with the default excludes", len(seriesAll), len(seriesDefault))
}

// TestRoute_Metrics: a preset route's Metrics set by its topic entry
// replace the defaults: an include keeps only what it names, an empty
// exclude keeps everything, an exclude of one's own drops what it names.
func TestRoute_Metrics(t *testing.T) {
	var fx testkit.Fixture
	for _, f := range presetFixtures(t) {
		if f.Name == "tasmota-state-epoch.txt" {
			fx = f
		}
	}
	for _, tc := range []struct {
		name    string
		m       *Metrics
		want    []string
		ignored int
	}{
		{"include", &Metrics{Include: []string{"Wifi.*"}}, []string{"Wifi.AP", "Wifi.Channel", "Wifi.RSSI", "Wifi.LinkCount", "Wifi.DeepSleep", "Wifi.Heap"}, 5 + 5},
		{"empty exclude", &Metrics{Exclude: []string{}}, []string{"UptimeSec", "Heap", "Sleep", "LoadAvg", "MqttCount", "Wifi.AP", "Wifi.Channel", "Wifi.RSSI", "Wifi.LinkCount", "Wifi.DeepSleep", "Wifi.Heap"}, 5},
		{"own exclude", &Metrics{Exclude: []string{"Wifi.*", "*Sec"}}, []string{"Heap", "Sleep", "LoadAvg", "MqttCount"}, 5 + 7},
		{"include and exclude", &Metrics{Include: []string{"Wifi.*"}, Exclude: []string{"Wifi.Heap"}}, []string{"Wifi.AP", "Wifi.Channel", "Wifi.RSSI", "Wifi.LinkCount", "Wifi.DeepSleep"}, 5 + 6},
	} {
		got, ignored, err := decodeFixture(t, fx, tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if names := metricNames(got); !slices.Equal(names, tc.want) || ignored != tc.ignored {
			t.Errorf("%s: got %v (ignored %d), want %v (ignored %d)", tc.name, names, ignored, tc.want, tc.ignored)
		}
	}
	if err := (&Metrics{Exclude: []string{"[a"}}).Check(); err == nil {
		t.Error("Check passed a bad pattern")
	}
}

// TestTelegraf_DeviceTag: with DeviceTag, the tag it names is the device
// and neither it nor host is a part of the metric name; a line without
// the tag is the topic's device.
func TestTelegraf_DeviceTag(t *testing.T) {
	routes, err := PresetRoutes("telegraf", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := routes[0]
	payload := "modbus,host=gw1,my\\ source=meter\\ 1,slave=2 voltage=230.5 1676522982000000000\n" +
		"modbus,host=gw1,slave=3 voltage=231 1676522982000000000\n"
	for _, tc := range []struct {
		tag  string
		want []buffer.Reading
	}{
		{"my source", []buffer.Reading{
			rd("meter 1", "modbus.voltage{slave=2}", 1676522982000000000, 230.5),
			rd("topic-host", "modbus.voltage{slave=3}", 1676522982000000000, 231),
		}},
		{"", []buffer.Reading{
			rd("gw1", "modbus.voltage{my source=meter 1,slave=2}", 1676522982000000000, 230.5),
			rd("gw1", "modbus.voltage{slave=3}", 1676522982000000000, 231),
		}},
	} {
		r.DeviceTag = tc.tag
		d := Decoder{units: &unitBook{}}
		got, _, err := d.DecodeRoute(nil, &r, []byte(payload), "topic-host", "", testRecv)
		if err != nil {
			t.Fatalf("device_tag %q: %v", tc.tag, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("device_tag %q: got %s\nwant %s", tc.tag, showReadings(got), showReadings(tc.want))
		}
	}
}
