package payload

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	z, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func mustTimeFormat(t *testing.T, s string) TimeFormat {
	t.Helper()
	f, err := ParseTimeFormat(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDecodeRoute_Mapping reads documents that carry their own ids.
func TestDecodeRoute_Mapping(t *testing.T) {
	at := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixNano()
	}
	ru := func(device, metric string, ts int64, v float64, unit string) buffer.Reading {
		return buffer.Reading{Device: device, Metric: metric, TS: ts, Value: v, Unit: unit}
	}
	for _, tc := range []struct {
		name           string
		m              Mapping
		metrics        *Metrics
		zone           string
		payload        string
		device, metric string
		want           []buffer.Reading
		ignored        int
		reason         string
	}{
		{name: "stock tick", m: Mapping{DeviceField: "symbol", TimeField: "d", TimeFormat: mustTimeFormat(t, "unix_ms")}, metrics: &Metrics{Include: []string{"p"}},
			payload: `{"p":7296.89,"symbol":"BTCUSDT","d":1575526691134,"v":0.011467}`,
			want:    []buffer.Reading{rd("BTCUSDT", "p", at("2019-12-05T06:18:11.134Z"), 7296.89)}, ignored: 1},
		{name: "reading document", m: Mapping{DeviceField: "device", TimeField: "timestamp", ValueField: "reading", MetricField: "name", UnitField: "units"},
			payload: `{"device":"boiler 2","name":"flow temp","reading":"61.5","units":"°C","timestamp":"2026-11-22T10:00:00+01:00"}`,
			want:    []buffer.Reading{ru("boiler 2", "flow temp", at("2026-11-22T09:00:00Z"), 61.5, "°C")}},
		{name: "value and unit per object", m: Mapping{ValueField: "v", UnitField: "u"},
			payload: `{"temp":{"v":21.5,"u":"°C"},"hum":{"v":40,"u":"%"},"fw":"1.2"}`, device: "d",
			want: []buffer.Reading{ru("d", "temp", recvNS, 21.5, "°C"), ru("d", "hum", recvNS, 40, "%")}},
		{name: "top-level value named by the topic", m: Mapping{ValueField: "val"},
			payload: `{"val":3}`, device: "d", metric: "co2",
			want: []buffer.Reading{rd("d", "co2", recvNS, 3)}},
		{name: "strip prefix", m: Mapping{StripPrefix: "data.values", DeviceField: "meta.id"},
			payload: `{"meta":{"id":"m-1","rssi":-70},"data":{"values":{"a":1,"b":{"c":2}},"seq":5}}`,
			want:    []buffer.Reading{rd("m-1", "a", recvNS, 1), rd("m-1", "b.c", recvNS, 2)}},
		{name: "exclude", metrics: &Metrics{Exclude: []string{"rssi", "wifi.*"}},
			payload: `{"t":1,"rssi":-60,"wifi":{"ch":6}}`, device: "d",
			want: []buffer.Reading{rd("d", "t", recvNS, 1)}, ignored: 2},
		{name: "exclude after strip prefix and value field", m: Mapping{StripPrefix: "data", ValueField: "v"}, metrics: &Metrics{Exclude: []string{"rssi"}},
			payload: `{"data":{"t":{"v":1},"rssi":{"v":-60}}}`, device: "d",
			want: []buffer.Reading{rd("d", "t", recvNS, 1)}, ignored: 1},
		{name: "document unit", m: Mapping{UnitField: "unit"},
			payload: `{"t":1,"unit":"°F"}`, device: "d",
			want: []buffer.Reading{ru("d", "t", recvNS, 1, "°F")}},
		{name: "layout in zone ahead of UTC", m: Mapping{TimeField: "when", TimeFormat: mustTimeFormat(t, "02.01.2006 15:04:05")}, zone: "Europe/Moscow",
			payload: `{"when":"22.11.2026 13:00:00","t":1}`, device: "d",
			want: []buffer.Reading{rd("d", "t", at("2026-11-22T10:00:00Z"), 1)}},
		{name: "local ISO time behind UTC", m: Mapping{}, zone: "America/New_York",
			payload: `{"Time":"2026-11-22T05:00:00","t":1}`, device: "d",
			want: []buffer.Reading{rd("d", "t", at("2026-11-22T10:00:00Z"), 1)}},
		{name: "offset beats zone", m: Mapping{}, zone: "America/New_York",
			payload: `{"Time":"2026-11-22T10:00:00Z","t":1}`, device: "d",
			want: []buffer.Reading{rd("d", "t", at("2026-11-22T10:00:00Z"), 1)}},
		{name: "epoch seconds float", m: Mapping{TimeField: "ts"},
			payload: `{"ts":1763805600.25,"t":1}`, device: "d",
			want: []buffer.Reading{rd("d", "t", at("2025-11-22T10:00:00.25Z"), 1)}},
		{name: "no device", m: Mapping{DeviceField: "id"}, payload: `{"t":1}`, reason: ReasonBadDevice},
		{name: "bad layout time", m: Mapping{TimeField: "when", TimeFormat: mustTimeFormat(t, "2006-01-02")}, payload: `{"when":"yesterday","t":1}`, device: "d", reason: ReasonBadTimestamp},
		{name: "not JSON", m: Mapping{}, payload: `21.5`, device: "d", reason: ReasonInvalidJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Route{Format: FormatJSON, Mapping: &tc.m, Metrics: tc.metrics}
			if tc.zone != "" {
				r.Zone = mustZone(t, tc.zone)
			}
			var d Decoder
			got, ignored, err := d.DecodeRoute(nil, &r, []byte(tc.payload), tc.device, tc.metric, testRecv)
			if RejectReason(err) != tc.reason {
				t.Fatalf("err %v, want reason %q", err, tc.reason)
			}
			if tc.reason != "" {
				return
			}
			if !reflect.DeepEqual(noWords(t, got), tc.want) || ignored != tc.ignored {
				t.Errorf("got %s (ignored %d)\nwant %s (ignored %d)", showReadings(got), ignored, showReadings(tc.want), tc.ignored)
			}
		})
	}
}

// TestDecodeRoute_ZoneOnFormats reads local times in a topic's zone with
// the plain formats too.
func TestDecodeRoute_ZoneOnFormats(t *testing.T) {
	r := Route{Format: FormatAuto, Zone: mustZone(t, "Asia/Kolkata")}
	var d Decoder
	got, _, err := d.DecodeRoute(nil, &r, []byte(`{"time":"2026-11-22 15:30:00","t":1}`), "d", "", testRecv)
	want := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano()
	if err != nil || len(got) != 1 || got[0].TS != want {
		t.Fatalf("got %v, %v; want time %d", got, err, want)
	}
}

// TestDecodeRoute_Checks rejects readings out of range, and messages
// without a required metric.
func TestDecodeRoute_Checks(t *testing.T) {
	lo, hi := -40.0, 85.0
	r := Route{Format: FormatJSON, Checks: &Checks{Range: map[string]Range{"temp": {Min: &lo, Max: &hi}}, Required: []string{"temp"}},
		Units: map[string]string{"temp": "°C"}}
	for _, tc := range []struct{ payload, reason string }{
		{`{"temp":21}`, ""},
		{`{"temp":-40}`, ""},
		{`{"temp":85.1}`, ReasonOutOfRange},
		{`{"temp":-273}`, ReasonOutOfRange},
		{`{"hum":40}`, ReasonMissingMetric},
	} {
		var d Decoder
		got, _, err := d.DecodeRoute(nil, &r, []byte(tc.payload), "d", "", testRecv)
		if RejectReason(err) != tc.reason {
			t.Errorf("%s: %v, want %q", tc.payload, err, tc.reason)
		}
		if err == nil && got[0].Unit != "°C" {
			t.Errorf("%s: unit %q, want °C from the route", tc.payload, got[0].Unit)
		}
	}
}

// TestDecodeRoute_Skip counts a skipped route's messages as their kind.
func TestDecodeRoute_Skip(t *testing.T) {
	r := Route{Skip: SkipAvailability}
	var d Decoder
	_, _, err := d.DecodeRoute(nil, &r, []byte("Offline"), "d", "", testRecv)
	if SkipKind(err) != SkipAvailability {
		t.Fatalf("err %v, want a skip", err)
	}
}

// TestDecodeRoute_MappingEdges reads documents at the edges of the options.
func TestDecodeRoute_MappingEdges(t *testing.T) {
	long := strings.Repeat("m", 70)
	for _, tc := range []struct {
		name    string
		m       Mapping
		units   map[string]string
		payload string
		want    []buffer.Reading
		reason  string
	}{
		{name: "long metric field", m: Mapping{ValueField: "v", MetricField: "name"}, payload: `{"name":"` + long + `","v":1}`,
			want: []buffer.Reading{rd("d", long, recvNS, 1)}},
		{name: "metric field not a string", m: Mapping{ValueField: "v", MetricField: "name"}, payload: `{"name":5,"v":1}`, reason: ReasonBadMetric},
		{name: "unit beside its value only", m: Mapping{ValueField: "v", UnitField: "u"}, payload: `{"a":{"v":1,"u":"W"},"b":{"v":2},"c":{"u":"V","v":3}}`,
			want: []buffer.Reading{withUnit(rd("d", "a", recvNS, 1), "W"), rd("d", "b", recvNS, 2), withUnit(rd("d", "c", recvNS, 3), "V")}},
		{name: "units override", m: Mapping{UnitField: "u"}, units: map[string]string{"t": "K"}, payload: `{"t":1,"u":"C"}`,
			want: []buffer.Reading{withUnit(rd("d", "t", recvNS, 1), "K")}},
		{name: "empty", m: Mapping{}, payload: " ", reason: ReasonEmptyPayload},
		{name: "array", m: Mapping{}, payload: `[{"t":1}]`, reason: ReasonInvalidJSON},
		{name: "layout past 2262", m: Mapping{TimeField: "at", TimeFormat: mustTimeFormat(t, "2006-01-02 15:04:05")}, payload: `{"at":"2262-12-01 00:00:00","t":1}`, reason: ReasonBadTimestamp},
		{name: "layout, number", m: Mapping{TimeField: "at", TimeFormat: mustTimeFormat(t, "2006-01-02 15:04:05")}, payload: `{"at":5,"t":1}`, reason: ReasonBadTimestamp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Route{Format: FormatJSON, Mapping: &tc.m, Units: tc.units}
			var d Decoder
			got, _, err := d.DecodeRoute(nil, &r, []byte(tc.payload), "d", "", testRecv)
			if RejectReason(err) != tc.reason {
				t.Fatalf("err %v, want reason %q", err, tc.reason)
			}
			if tc.reason == "" && !reflect.DeepEqual(noWords(t, got), tc.want) {
				t.Errorf("got %s\nwant %s", showReadings(got), showReadings(tc.want))
			}
		})
	}
}

// TestDecodeRoute_RequiredSettles: a message without a value (an action,
// "unavailable") is not held to the required metrics.
func TestDecodeRoute_RequiredSettles(t *testing.T) {
	r := Route{Format: FormatJSON, Checks: &Checks{Required: []string{"temp"}}}
	var d Decoder
	if _, ignored, err := d.DecodeRoute(nil, &r, []byte(`{"temp":"unavailable"}`), "d", "", testRecv); err != nil || ignored != 1 {
		t.Errorf("got %v, ignored %d; want settled", err, ignored)
	}
}

// manyUnits is a document of n objects, each with a value and a unit.
func manyUnits(n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"s%d":{"v":%d,"u":"W"}`, i, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestDecodeRoute_ManyUnits reads a document of 20,000 objects with a
// unit each; BenchmarkDecodeRoute_ManyUnits says how its time grows.
func TestDecodeRoute_ManyUnits(t *testing.T) {
	r := Route{Format: FormatJSON, Mapping: &Mapping{ValueField: "v", UnitField: "u"}}
	var d Decoder
	got, _, err := d.DecodeRoute(nil, &r, manyUnits(20000), "d", "", testRecv)
	if err != nil || len(got) != 20000 || got[19999].Unit != "W" {
		t.Fatalf("got %d readings, %v", len(got), err)
	}
}

// BenchmarkDecodeRoute_ManyUnits decodes documents of 1,000 and 10,000
// objects: ns/op should grow tenfold, not a hundredfold.
func BenchmarkDecodeRoute_ManyUnits(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			payload := manyUnits(n)
			r := Route{Format: FormatJSON, Mapping: &Mapping{ValueField: "v", UnitField: "u"}}
			var d Decoder
			out := make([]buffer.Reading, 0, n)
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, _, err := d.DecodeRoute(out[:0], &r, payload, "d", "", testRecv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestParseTimeFormat(t *testing.T) {
	for _, s := range []string{"", "auto", "unix", "unix_ms", "unix_us", "unix_ns", "rfc3339", "2006-01-02 15:04:05", "02.01.2006 15:04", "2006-002 15:04", "Jan 2 2006 3:04PM"} {
		if _, err := ParseTimeFormat(s); err != nil {
			t.Errorf("ParseTimeFormat(%q): %v", s, err)
		}
	}
	for _, s := range []string{"yesterday", "foo2006x01", "15:04:05", "unix_s", "01-02"} {
		if _, err := ParseTimeFormat(s); err == nil {
			t.Errorf("ParseTimeFormat(%q): no error", s)
		}
	}
}
