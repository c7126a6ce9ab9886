package gateway

import (
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		pattern        string
		filter         string
		device, metric bool
	}{
		{"sensors/{device}/{metric}", "sensors/+/+", true, true},
		{"zigbee2mqtt/{device}", "zigbee2mqtt/+", true, false},
		{"tele/{device}/SENSOR", "tele/+/SENSOR", true, false},
		{"shellies/{device}/relay/0/{metric}", "shellies/+/relay/0/+", true, true},
		{"{metric}/{device}", "+/+", true, true},
		{"home/+/{device}/#", "home/+/+/#", true, false},
		{"#", "#", false, false},
		{"+", "+", false, false},
		{"a/b", "a/b", false, false},
		{"/", "/", false, false},
		{"a//{device}/", "a//+/", true, false},
		{"$SYS/{metric}", "$SYS/+", false, true},
		{"café/{device}", "café/+", true, false},
		{"zigbee2mqtt/{device+}", "zigbee2mqtt/#", true, false},
		{"zigbee2mqtt/{device+}/availability", "zigbee2mqtt/#", true, false},
		{"shellies/{device}/{metric+}", "shellies/+/#", true, true},
		{"homeassistant/{device}/{device}/state", "homeassistant/+/+/state", true, false},
		{"a/{metric}/{metric}/{device}", "a/+/+/+", true, true},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", tc.pattern, err)
			continue
		}
		if p.Filter() != tc.filter || p.String() != tc.pattern || p.HasDevice() != tc.device || p.HasMetric() != tc.metric {
			t.Errorf("ParsePattern(%q) = filter %q, string %q, device %v, metric %v; want %q, %q, %v, %v",
				tc.pattern, p.Filter(), p.String(), p.HasDevice(), p.HasMetric(), tc.filter, tc.pattern, tc.device, tc.metric)
		}
	}
}

func TestParsePattern_Errors(t *testing.T) {
	for _, tc := range []struct{ pattern, err string }{
		{"a/{dev}/b", `pattern "a/{dev}/b": unknown placeholder {dev} (want {device}, {metric}, {device+} or {metric+})`},
		{"{}", `pattern "{}": unknown placeholder {} (want {device}, {metric}, {device+} or {metric+})`},
		{"{Device}", `pattern "{Device}": unknown placeholder {Device} (want {device}, {metric}, {device+} or {metric+})`},
		{"a/{device+}/{device}", `pattern "a/{device+}/{device}": {device+} is the whole device id: it cannot be joined with another device placeholder`},
		{"{metric+}/{metric}", `pattern "{metric+}/{metric}": {metric+} is the whole metric name: it cannot be joined with another metric placeholder`},
		{"{device+}/{metric+}", `pattern "{device+}/{metric+}": at most one of {device+}, {metric+} and "#" may appear: a topic must match in one way only`},
		{"{device+}/#", `pattern "{device+}/#": at most one of {device+}, {metric+} and "#" may appear: a topic must match in one way only`},
		{"a/x{device}", `pattern "a/x{device}": level "x{device}": a placeholder must be a whole level`},
		{"a/{device", `pattern "a/{device": level "{device": a placeholder must be a whole level`},
		{"a/device}", `pattern "a/device}": level "device}": a placeholder must be a whole level`},
		{"a/{{device}}", `pattern "a/{{device}}": level "{{device}}": a placeholder must be a whole level`},
		{"a/#/b", `pattern "a/#/b": "#" must be the last level`},
		{"a/b#", `pattern "a/b#": level "b#": wildcards "+" and "#" must be a whole level`},
		{"a/+b", `pattern "a/+b": level "+b": wildcards "+" and "#" must be a whole level`},
		{"", `pattern "": empty pattern`},
		{"a\x00b", `pattern "a\x00b": contains U+0000`},
		{"a\xffb", `pattern "a\xffb": not valid UTF-8`},
		{strings.Repeat("a", 65536), `longer than 65535 bytes`},
	} {
		p, err := ParsePattern(tc.pattern)
		if err == nil {
			t.Errorf("ParsePattern(%.40q) = %v, want error %q", tc.pattern, p, tc.err)
			continue
		}
		if !strings.HasSuffix(err.Error(), tc.err) {
			t.Errorf("ParsePattern(%.40q) error = %q, want %q", tc.pattern, err, tc.err)
		}
	}
}

func TestPattern_Match(t *testing.T) {
	for _, tc := range []struct {
		pattern, topic string
		device, metric string
		ok             bool
	}{
		{"sensors/{device}/{metric}", "sensors/boiler/temp", "boiler", "temp", true},
		{"sensors/{device}/{metric}", "sensors/boiler", "", "", false},
		{"sensors/{device}/{metric}", "sensors/boiler/temp/x", "", "", false},
		{"sensors/{device}/{metric}", "sensors//temp", "", "", false}, // placeholders never match an empty level
		{"sensors/{device}/{metric}", "Sensors/boiler/temp", "", "", false},
		{"{metric}/{device}", "temp/boiler", "boiler", "temp", true},
		{"zigbee2mqtt/{device}", "zigbee2mqtt/0x00158d0001a2b3c4", "0x00158d0001a2b3c4", "", true},
		{"zigbee2mqtt/{device}", "zigbee2mqtt/bridge/state", "", "", false},
		{"tele/{device}/SENSOR", "tele/tasmota_1/SENSOR", "tasmota_1", "", true},
		{"tele/{device}/SENSOR", "tele/tasmota_1/STATE", "", "", false},
		{"a/+/{device}", "a//d", "d", "", true}, // "+" matches an empty level
		{"a/+/{device}", "a/x/d", "d", "", true},
		{"home/{device}/#", "home/d", "d", "", true}, // "#" also matches the parent
		{"home/{device}/#", "home/d/", "d", "", true},
		{"home/{device}/#", "home/d/x/y/z", "d", "", true},
		{"home/{device}/#", "home", "", "", false},
		{"#", "anything/at/all", "", "", true},
		{"#", "$SYS/broker", "", "", false}, // wildcards do not match $ topics
		{"+/x", "$SYS/x", "", "", false},
		{"{device}/x", "$SYS/x", "", "", false},
		{"$SYS/{metric}", "$SYS/load", "", "load", true},
		{"a/b", "a/b", "", "", true},
		{"a/b", "a/b/", "", "", false},
		{"a/b/", "a/b/", "", "", true},
		{"/{device}", "/d", "d", "", true},
		{"a/{device}", "", "", "", false},
		{"a/{device}", "a/+", "", "", false}, // not a topic name
		{"a/{device}", "a/#", "", "", false},
		{"a/{device}", "a/b\x00", "", "", false},
		{"z/{device+}", "z/kitchen/door", "kitchen/door", "", true},
		{"z/{device+}", "z/lamp", "lamp", "", true},
		{"z/{device+}", "z", "", "", false},
		{"z/{device+}", "z/a//b", "", "", false}, // placeholders never match an empty level
		{"z/{device+}", "z/a/", "", "", false},
		{"z/{device+}/set", "z/kitchen/door/set", "kitchen/door", "", true},
		{"z/{device+}/set", "z/door/set", "door", "", true},
		{"z/{device+}/set", "z/set", "", "", false},
		{"z/{device+}/set", "z/door/get", "", "", false},
		{"z/{device+}/+/{metric}", "z/a/b/x/t", "a/b", "t", true},
		{"s/{device}/{metric+}", "s/plug-1/relay/0/power", "plug-1", "relay.0.power", true},
		{"s/{device}/{metric+}", "s/plug-1/temperature", "plug-1", "temperature", true},
		{"s/{device}/{metric+}", "s/plug-1", "", "", false},
		{"ha/{device}/{device}/state", "ha/sensor/outside_temperature/state", "sensor.outside_temperature", "", true},
		{"ha/{device}/{device}/{metric}", "ha/climate/hall/current_temperature", "climate.hall", "current_temperature", true},
		{"{device+}/x", "$SYS/x", "", "", false},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", tc.pattern, err)
		}
		device, metric, ok := p.Match(tc.topic)
		if device != tc.device || metric != tc.metric || ok != tc.ok {
			t.Errorf("ParsePattern(%q).Match(%q) = %q, %q, %v; want %q, %q, %v",
				tc.pattern, tc.topic, device, metric, ok, tc.device, tc.metric, tc.ok)
		}
	}
	if _, _, ok := (Pattern{}).Match("a"); ok {
		t.Error("zero Pattern matched a topic")
	}
}

func TestPattern_MatchDoesNotAllocate(t *testing.T) {
	p, err := ParsePattern("sensors/{device}/{metric}")
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, _, ok := p.Match("sensors/boiler/temperature"); !ok {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times", allocs)
	}
}

func BenchmarkPattern_Match(b *testing.B) {
	p, err := ParsePattern("sensors/{device}/{metric}")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Match("sensors/boiler/temperature")
	}
}

// refMatch is a straightforward model of Pattern.Match for fuzzing.
func refMatch(pattern, topic string) (device, metric string, ok bool) {
	if topic == "" || strings.ContainsAny(topic, "+#\x00") {
		return "", "", false
	}
	pl, tl := strings.Split(pattern, "/"), strings.Split(topic, "/")
	if topic[0] == '$' && (pl[0] == "+" || pl[0] == "#" || pl[0] == PlaceholderDevice || pl[0] == PlaceholderMetric) {
		return "", "", false
	}
	for i, l := range pl {
		if l == "#" {
			return device, metric, true
		}
		if i >= len(tl) {
			return "", "", false
		}
		switch l {
		case "+":
		case PlaceholderDevice, PlaceholderMetric:
			if tl[i] == "" {
				return "", "", false
			}
			if l == PlaceholderDevice {
				device = tl[i]
			} else {
				metric = tl[i]
			}
		default:
			if l != tl[i] {
				return "", "", false
			}
		}
	}
	if len(tl) != len(pl) {
		return "", "", false
	}
	return device, metric, true
}

// checkPattern checks the invariants of a successfully parsed pattern.
func checkPattern(t *testing.T, s string, p Pattern) {
	t.Helper()
	if p.String() != s {
		t.Fatalf("ParsePattern(%q).String() = %q", s, p.String())
	}
	f := p.Filter()
	if strings.Contains(f, "{") || strings.Count(f, "/") != strings.Count(s, "/") {
		t.Fatalf("ParsePattern(%q).Filter() = %q", s, f)
	}
	fp, err := ParsePattern(f)
	if err != nil || fp.Filter() != f || fp.HasDevice() || fp.HasMetric() {
		t.Fatalf("filter %q of %q does not parse as a plain filter: %v", f, s, err)
	}
	if p.HasDevice() != strings.Contains(s, PlaceholderDevice) || p.HasMetric() != strings.Contains(s, PlaceholderMetric) {
		t.Fatalf("ParsePattern(%q): HasDevice %v, HasMetric %v", s, p.HasDevice(), p.HasMetric())
	}
	for i, l := range strings.Split(f, "/") {
		if strings.ContainsAny(l, "+#") && len(l) != 1 || l == "#" && i != strings.Count(f, "/") {
			t.Fatalf("ParsePattern(%q): invalid MQTT filter %q", s, f)
		}
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"sensors/{device}/{metric}", "a/{dev}/b", "home/+/{device}/#", "#", "/", "a/{device}{metric}", "{metric}/x/{device}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pattern ") {
				t.Fatalf("ParsePattern(%q) error %q does not name the pattern", s, err)
			}
			return
		}
		checkPattern(t, s, p)
	})
}

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"sensors/{device}/{metric}", "sensors/boiler/temp"},
		{"home/{device}/#", "home/d"},
		{"#", "$SYS/x"},
		{"a/+/{device}", "a//d"},
		{"zigbee2mqtt/{device}", "zigbee2mqtt/0x00158d0001a2b3c4"},
		{"{metric}/{device}", "/x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		device, metric, ok := p.Match(topic)
		wd, wm, wok := refMatch(pattern, topic)
		if device != wd || metric != wm || ok != wok {
			t.Fatalf("ParsePattern(%q).Match(%q) = %q, %q, %v; model says %q, %q, %v", pattern, topic, device, metric, ok, wd, wm, wok)
		}
		if ok && (p.HasDevice() != (device != "") || p.HasMetric() != (metric != "") ||
			!strings.Contains(topic, device) || !strings.Contains(topic, metric)) {
			t.Fatalf("ParsePattern(%q).Match(%q) = %q, %q", pattern, topic, device, metric)
		}
	})
}
