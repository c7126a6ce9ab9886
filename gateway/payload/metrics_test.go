package payload

import (
	"path"
	"reflect"
	"slices"
	"testing"
	"time"

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
	d := Decoder{Units: testUnits{}}
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
		"shelly-rpc-notifyfullstatus-plusht.txt": {"cloud.connected", "sys.uptime", "wifi.status", "wifi.rssi",
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
	r := routes[0].Route
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
		d := Decoder{Units: testUnits{}}
		got, _, err := d.DecodeRoute(nil, &r, []byte(payload), "topic-host", "", testRecv)
		if err != nil {
			t.Fatalf("device_tag %q: %v", tc.tag, err)
		}
		if !reflect.DeepEqual(noWords(t, got), tc.want) {
			t.Errorf("device_tag %q: got %s\nwant %s", tc.tag, showReadings(got), showReadings(tc.want))
		}
	}
}

// BenchmarkDecodeRoute_TasmotaState reads a Tasmota STATE message with the
// preset's default excludes, and with every field (the cost of the
// filter: a path.Match per reading and pattern).
func BenchmarkDecodeRoute_TasmotaState(b *testing.B) {
	routes, err := PresetRoutes("tasmota", "", time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	var r *Route
	for i := range routes {
		if routes[i].Pattern == "tele/{device}/STATE" {
			r = &routes[i].Route
		}
	}
	payload := []byte(`{"Time":"2019-09-04T13:08:48","Epoch":1567595328,"Uptime":"0T00:00:14","UptimeSec":14,"Heap":24,"SleepMode":"Dynamic","Sleep":50,"LoadAvg":20,"MqttCount":1,"Wifi":{"AP":1,"SSId":"MyWLAN","BSSId":"AA:FF:AA:AA:AA:AA","Channel":11,"RSSI":100,"LinkCount":1,"Downtime":"0T00:00:08","DeepSleep":300,"Heap":25160}}`)
	all := *r
	all.Metrics = nil
	for _, bc := range []struct {
		name string
		r    *Route
	}{{"defaults", r}, {"all", &all}} {
		b.Run(bc.name, func(b *testing.B) {
			d := Decoder{Units: testUnits{}}
			dst := make([]buffer.Reading, 0, 16)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := d.DecodeRoute(dst[:0], bc.r, payload, "plug", "", testRecv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMatchName: the short cuts agree with path.Match.
func TestMatchName(t *testing.T) {
	names := []string{"", "Wifi", "Wifi.AP", "Wifi.", "Wifi/AP", "wifi.ap", "update.installed_version", "RTLRssi", "a*b", "sys.cfg_rev"}
	patterns := []string{"Wifi.AP", "Wifi.*", "Wifi*", "*", "", "RTL*", "sys.*_rev", "a\\*b", "W?fi.AP", "[uU]pdate.*", "update.*"}
	for _, p := range patterns {
		for _, n := range names {
			want, _ := path.Match(p, n)
			if got := matchName(p, n); got != want {
				t.Errorf("matchName(%q, %q) = %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}
