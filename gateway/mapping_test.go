package gateway

import (
	"reflect"
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
		zone           string
		payload        string
		device, metric string
		want           []buffer.Reading
		ignored        int
		reason         string
	}{
		{name: "stock tick", m: Mapping{DeviceField: "symbol", TimeField: "d", TimeFormat: mustTimeFormat(t, "unix_ms"), Include: []string{"p"}},
			payload: `{"p":7296.89,"symbol":"BTCUSDT","d":1575526691134,"v":0.011467}`,
			want:    []buffer.Reading{rd("BTCUSDT", "p", at("2019-12-05T06:18:11.134Z"), 7296.89)}},
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
		{name: "exclude", m: Mapping{Exclude: []string{"rssi", "wifi.*"}},
			payload: `{"t":1,"rssi":-60,"wifi":{"ch":6}}`, device: "d",
			want: []buffer.Reading{rd("d", "t", recvNS, 1)}},
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
			r := Route{Format: FormatJSON, Mapping: &tc.m}
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
			if !reflect.DeepEqual(got, tc.want) || ignored != tc.ignored {
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
