package payload

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// presetFixtures returns testdata/presets/*.txt: messages copied from each
// family's own documentation (testkit.Fixture says how they are written).
func presetFixtures(t testing.TB) []testkit.Fixture {
	t.Helper()
	return testkit.LoadFixtures(t, filepath.Join("testdata", "presets"))
}

// routeFor returns the route of the fixture's preset that its topic
// matches, and what the topic captured.
func routeFor(t testing.TB, fx testkit.Fixture) (r *Route, device, metric string) {
	t.Helper()
	var zone *time.Location
	if fx.TimeZone != "" {
		var err error
		if zone, err = time.LoadLocation(fx.TimeZone); err != nil {
			t.Fatal(err)
		}
	}
	routes, err := PresetRoutes(fx.Preset, "", zone)
	if err != nil {
		t.Fatalf("%s: %v", fx.Name, err)
	}
	for i := range routes {
		if d, m, ok := matchTopic(routes[i].Pattern, fx.Topic); ok {
			return &routes[i].Route, d, m
		}
	}
	t.Fatalf("%s: no route of preset %s matches %q", fx.Name, fx.Preset, fx.Topic)
	return nil, "", ""
}

// matchTopic matches topic against a preset's pattern as gateway's
// Pattern.Match does, slowly: what the {device} and {metric} levels
// captured, each joined with '.', or {device+} (levels kept) and {metric+}
// (levels joined with '.'). gateway's TestPresetRoutes_Fixtures checks that
// its routing agrees for every fixture.
func matchTopic(pattern, topic string) (device, metric string, ok bool) {
	if topic == "" || strings.ContainsAny(topic, "+#\x00") {
		return "", "", false
	}
	pl, tl := strings.Split(pattern, "/"), strings.Split(topic, "/")
	if topic[0] == '$' && strings.ContainsAny(pl[0], "+#{") {
		return "", "", false
	}
	join := func(name, part string) string {
		if name == "" {
			return part
		}
		return name + "." + part
	}
	for i, l := range pl {
		switch {
		case l == "#":
			return device, metric, len(tl) >= i
		case i >= len(tl):
			return "", "", false
		case l == "{device+}" || l == "{metric+}":
			n := len(tl) - (len(pl) - 1 - i)
			if n < i+1 || slices.Contains(tl[i:n], "") {
				return "", "", false
			}
			if l == "{device+}" {
				device = strings.Join(tl[i:n], "/")
			} else {
				metric = strings.Join(tl[i:n], ".")
			}
			tl = append(tl[:i+1:i+1], tl[n:]...)
		case l == "{device}" || l == "{metric}":
			if tl[i] == "" {
				return "", "", false
			}
			if l == "{device}" {
				device = join(device, tl[i])
			} else {
				metric = join(metric, tl[i])
			}
		case l != "+" && l != tl[i]:
			return "", "", false
		}
	}
	return device, metric, len(tl) == len(pl)
}

// TestPresets_Fixtures reads each fixture with its preset and checks the
// exact readings, or that the message is skipped as the kind it is. The
// fixtures list every field a preset reads: this reads them without the
// preset's default excludes (TestPresets_DefaultExcludes).
func TestPresets_Fixtures(t *testing.T) {
	perPreset := map[string]int{}
	for _, fx := range presetFixtures(t) {
		perPreset[fx.Preset]++
		t.Run(fx.Name, func(t *testing.T) {
			r, device, metric := routeFor(t, fx)
			all := *r
			all.Metrics = nil
			d := Decoder{Units: testUnits{}}
			got, ignored, err := d.DecodeRoute(nil, &all, fx.Payload, device, metric, testRecv)
			if kind := SkipKind(err); kind != fx.Skip {
				t.Fatalf("skip %q (%v), want %q", kind, err, fx.Skip)
			}
			if fx.Skip != "" {
				return
			}
			if reason := RejectReason(err); reason != fx.Reject {
				t.Fatalf("reason %q (%v), want %q", reason, err, fx.Reject)
			}
			want := []buffer.Reading{}
			for _, fr := range fx.Readings {
				want = append(want, buffer.Reading{Device: fr.Device, Metric: fr.Metric, TS: fr.TS(testRecv), Value: fr.Value, Text: fr.Text, Unit: fr.Unit})
			}
			if got == nil {
				got = []buffer.Reading{}
			}
			if err == nil && !reflect.DeepEqual(noWords(t, got), want) {
				t.Errorf("readings differ\n got %s\nwant %s", showReadings(got), showReadings(want))
			}
			if fx.Reject == "" && ignored != fx.Ignored {
				t.Errorf("ignored %d, want %d", ignored, fx.Ignored)
			}
			if got := droppedReasons(&d); !slices.Equal(got, fx.Dropped) {
				t.Errorf("dropped %q, want %q", got, fx.Dropped)
			}
		})
	}
	for _, name := range PresetNames() {
		if perPreset[name] < 3 {
			t.Errorf("preset %s has %d fixtures, want at least 3", name, perPreset[name])
		}
	}
}

func showReadings(rs []buffer.Reading) string {
	var b strings.Builder
	for _, r := range rs {
		v := formatValue(r.Value)
		if r.IsText() {
			v = strconv.Quote(r.Text)
		}
		b.WriteString("\n  " + r.Device + " | " + r.Metric + " | " + r.Time().Format(time.RFC3339Nano) + " | " + v + " | " + r.Unit)
	}
	return b.String()
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestPresets_Names checks every preset's routes parse with their own base
// and with another, and that a base_topic is refused where there is none.
func TestPresets_Names(t *testing.T) {
	for _, name := range PresetNames() {
		if _, err := PresetRoutes(name, "", nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		_, err := PresetRoutes(name, "my/base", nil)
		if (err != nil) != (PresetBase(name) == "") {
			t.Errorf("%s with a base topic: %v", name, err)
		}
	}
	if _, err := PresetRoutes("tasmotta", "", nil); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("unknown preset: %v", err)
	}
	var se *SkipError
	if errors.As(error(&SkipError{Kind: SkipMeta}), &se) && SkipKind(se) != SkipMeta {
		t.Error("SkipKind")
	}
}

// fuzzRoute is the body of the fuzz targets of presets and mappings:
// whatever the payload, DecodeRoute skips it, rejects it cleanly, or
// returns valid readings, the same from a fresh Decoder.
func fuzzRoute(t *testing.T, r *Route, payload []byte, device, metric string) {
	d := Decoder{Units: testUnits{}}
	dst := make([]buffer.Reading, 1, 4)
	out, ignored, err := d.DecodeRoute(dst, r, payload, device, metric, testRecv)
	switch {
	case SkipKind(err) != "":
		if len(out) != 1 || ignored != 0 {
			t.Fatalf("%q skipped with %d readings, ignored %d", payload, len(out)-1, ignored)
		}
	case err != nil:
		var re *RejectError
		if !errors.As(err, &re) || len(out) != 1 || ignored != 0 {
			t.Fatalf("%q: err %v, out %d, ignored %d", payload, err, len(out), ignored)
		}
	default:
		if ignored < 0 {
			t.Fatalf("%q: ignored %d", payload, ignored)
		}
		for _, rd := range out[1:] {
			if math.IsInf(rd.Value, 0) || math.IsNaN(rd.Value) || encoding.CheckDevice(rd.Device) != "" || encoding.CheckMetric(rd.Metric) != "" ||
				rd.TS < 0 || rd.Unit != "" && !encoding.ValidUnit(rd.Unit) || badText(rd) || rd.IsText() && rd.Unit != "" {
				t.Fatalf("%q: invalid reading %+v", payload, rd)
			}
		}
	}
	fresh := Decoder{Units: testUnits{}}
	out2, ignored2, err2 := fresh.DecodeRoute(nil, r, payload, device, metric, testRecv)
	if fmt.Sprint(err) != fmt.Sprint(err2) || ignored != ignored2 || fmt.Sprint(out[1:]) != fmt.Sprint(out2) {
		t.Fatalf("%q not deterministic: %v %v / %v %v", payload, out[1:], err, out2, err2)
	}
}

// FuzzPresets fuzzes each preset fixture's payload on its own topic; the
// fixtures are the seed corpus.
func FuzzPresets(f *testing.F) {
	fixtures := presetFixtures(f)
	for i, fx := range fixtures {
		f.Add(uint16(i), fx.Payload)
	}
	f.Fuzz(func(t *testing.T, i uint16, payload []byte) {
		fx := fixtures[int(i)%len(fixtures)]
		r, device, metric := routeFor(t, fx)
		fuzzRoute(t, r, payload, device, metric)
	})
}

// FuzzMapping fuzzes a mapping that uses every option.
func FuzzMapping(f *testing.F) {
	for _, s := range []string{
		`{"meta":{"id":"m-1","ts":1763805600},"data":{"t":{"v":"21.5","u":"°C"},"h":{"v":40,"u":"%"}}}`,
		`{"meta":{"id":"a b"},"data":{"x":{"v":null}}}`,
		`{"data":{"t":{"v":1e999}}}`,
		`{"meta":{"id":"m-1"},"data":{"mode":{"v":"heat"},"s":{"v":" OFF "},"x":{"v":"a\u0001"}}}`,
	} {
		f.Add([]byte(s))
	}
	m := Mapping{DeviceField: "meta.id", TimeField: "meta.ts", ValueField: "v", UnitField: "u", StripPrefix: "data"}
	r := Route{Format: FormatJSON, Mapping: &m, Metrics: &Metrics{Exclude: []string{"x*"}}}
	f.Fuzz(func(t *testing.T, payload []byte) { fuzzRoute(t, &r, payload, "", "") })
}

// TestPresets_Edges reads messages at the edges of what the fixtures show.
func TestPresets_Edges(t *testing.T) {
	for _, tc := range []struct {
		preset, topic, payload string
		want                   []buffer.Reading
		ignored                int
		skip                   string
	}{
		{preset: "tasmota", topic: "stat/t1/POWER10", payload: "ON", want: []buffer.Reading{rd("t1", "POWER10", recvNS, 1)}},
		{preset: "tasmota", topic: "stat/t1/STATUS11", payload: "{}", skip: SkipMeta},
		{preset: "tasmota", topic: "tele/t1/SENSOR", payload: `{"DS18B20-1":{"Id":"","Temperature":1},"DS18B20-2":{"Id":null,"Temperature":2}}`,
			want: []buffer.Reading{withUnit(rd("t1", "DS18B20-1.Temperature", recvNS, 1), "°C"), withUnit(rd("t1", "DS18B20-2.Temperature", recvNS, 2), "°C")}, ignored: 2},
		{preset: "shelly", topic: "shellies/dw-1/sensor/state", payload: "close", want: []buffer.Reading{rd("dw-1", "sensor.state", recvNS, 0)}},
		{preset: "shelly", topic: "shellies/dw-1/sensor/state", payload: "open", want: []buffer.Reading{rd("dw-1", "sensor.state", recvNS, 1)}},
		{preset: "esphome", topic: "node/climate/hall/current_temperature/state", payload: "21.5", want: []buffer.Reading{rd("node", "hall.current_temperature", recvNS, 21.5)}},
		{preset: "zigbee2mqtt", topic: "zigbee2mqtt/plug", payload: `{"voltage":231,"power":12}`, want: []buffer.Reading{rd("plug", "voltage", recvNS, 231), withUnit(rd("plug", "power", recvNS, 12), "W")}},
		{preset: "telegraf", topic: "telegraf/h1/docker", payload: "docker_container_cpu,container_image=" + strings.Repeat("i", 100) + ",host=h1 usage_percent=1.5\ncpu,cpu=cpu0,host=h1 usage_idle=99\n",
			want: []buffer.Reading{rd("h1", "cpu.usage_idle{cpu=cpu0}", recvNS, 99)}, ignored: 1},
		{preset: "shelly-rpc", topic: "kitchen-plug/events/rpc", payload: `{"src":"shellyplus1pm-a8032ab12345","method":"NotifyStatus","params":{"switch:0":{"apower":12}}}`,
			want: []buffer.Reading{withUnit(rd("kitchen-plug", "switch:0.apower", recvNS, 12), "W")}},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			r, device, metric := routeFor(t, testkit.Fixture{Name: tc.topic, Preset: tc.preset, Topic: tc.topic})
			d := Decoder{Units: testUnits{}}
			got, ignored, err := d.DecodeRoute(nil, r, []byte(tc.payload), device, metric, testRecv)
			if SkipKind(err) != tc.skip || tc.skip == "" && err != nil {
				t.Fatalf("err %v, want skip %q", err, tc.skip)
			}
			if tc.skip == "" && (!reflect.DeepEqual(noWords(t, got), tc.want) || ignored != tc.ignored) {
				t.Errorf("got %s (ignored %d)\nwant %s (ignored %d)", showReadings(got), ignored, showReadings(tc.want), tc.ignored)
			}
		})
	}
}

// TestEsphomeStateTopic: the state topics whose units ESPHome's discovery
// gives are read as the preset's state routes capture them.
func TestEsphomeStateTopic(t *testing.T) {
	for _, tc := range []struct {
		topic, device, metric string
		ok                    bool
	}{
		{"livingroom/sensor/living_room_temperature/state", "livingroom", "living_room_temperature", true},
		{"node/climate/hall/current_temperature/state", "node", "hall.current_temperature", true},
		{"node//t/state", "node", "t", true},
		{"node/sensor//state", "", "", false},
		{"/sensor/t/state", "", "", false},
		{"node/sensor/t/command", "", "", false},
		{"node/sensor/t", "", "", false},
		{"node/a/b/c/d/state", "", "", false},
		{"$SYS/sensor/t/state", "", "", false},
		{"node/sensor/+/state", "", "", false},
	} {
		device, metric, ok := esphomeStateTopic(tc.topic)
		if device != tc.device || metric != tc.metric || ok != tc.ok {
			t.Errorf("esphomeStateTopic(%q) = %q, %q, %v; want %q, %q, %v", tc.topic, device, metric, ok, tc.device, tc.metric, tc.ok)
		}
		routes, err := PresetRoutes("esphome", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Route.read == nil || r.Pattern == "homeassistant/#" {
				continue
			}
			if d, m, ok := matchTopic(r.Pattern, tc.topic); ok && (!tc.ok || d != tc.device || m != tc.metric) {
				t.Errorf("route %s reads %q as %q, %q", r.Pattern, tc.topic, d, m)
			}
		}
	}
}
