package encoding

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckNames(t *testing.T) {
	for _, tt := range []struct {
		s              string
		device, metric bool
	}{
		{"kitchen/door", true, true},
		{"Küche Süd", true, true},
		{"温室 1", true, true},
		{"switch:0.apower", true, true},
		{".", false, true},
		{"..", false, true},
		{"", false, false},
		{"a\x00b", false, false},
		{"t\n", false, false},
		{"\xff", false, false},
		{"\u0085", false, false},
		{strings.Repeat("d", MaxDeviceLen), true, true},
		{strings.Repeat("d", MaxDeviceLen+1), false, true},
		{strings.Repeat("m", MaxMetricLen+1), false, false},
	} {
		if got := CheckDevice(tt.s) == ""; got != tt.device {
			t.Errorf("CheckDevice(%q) accepts: got %v, want %v (%s)", tt.s, got, tt.device, CheckDevice(tt.s))
		}
		if got := CheckMetric([]byte(tt.s)) == ""; got != tt.metric {
			t.Errorf("CheckMetric(%q) accepts: got %v, want %v (%s)", tt.s, got, tt.metric, CheckMetric(tt.s))
		}
	}
}

func TestValidUnit(t *testing.T) {
	for _, tt := range []struct {
		unit string
		want bool
	}{
		{"°C", true}, {"kWh", true}, {"m/s²", true}, {"µg/m³", true}, {"%", true}, {"lm ft", true},
		{strings.Repeat("é", MaxUnitLen/2), true},
		{"", false},
		{strings.Repeat("x", MaxUnitLen+1), false},
		{"C\x00", false}, {"\tC", false}, {"C\r\n", false}, {"\x7f", false}, {"\u0085", false},
		{"\xc3", false}, // half of "é"
	} {
		if got := ValidUnit(tt.unit); got != tt.want {
			t.Errorf("ValidUnit(%q): got %v, want %v", tt.unit, got, tt.want)
		}
	}
}

// FuzzCheckName: a name the rule accepts is printable UTF-8 of 1 to max
// bytes, so it holds no Sep, and the keys of a series so named parse back
// to it. The string and []byte forms agree.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"kitchen", "Küche Süd", "温室 1", "a\x00b", "\xff", "..", "t\n", "\u0085"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, device, metric string) {
		dp, mp := CheckDevice(device), CheckMetric(metric)
		if dp != CheckDevice([]byte(device)) || mp != CheckMetric([]byte(metric)) {
			t.Fatalf("string and []byte forms disagree on %q %q", device, metric)
		}
		for _, c := range []struct {
			s    string
			prob string
			max  int
		}{{device, dp, MaxDeviceLen}, {metric, mp, MaxMetricLen}} {
			if c.prob != "" {
				continue
			}
			if len(c.s) == 0 || len(c.s) > c.max || !utf8.ValidString(c.s) || strings.IndexByte(c.s, Sep) >= 0 {
				t.Fatalf("accepted %q", c.s)
			}
			for _, r := range c.s {
				if !unicode.IsPrint(r) {
					t.Fatalf("accepted %q with %U", c.s, r)
				}
			}
		}
		if dp != "" || mp != "" {
			return
		}
		want := Reading{Device: device, Metric: metric, TS: 1, Value: 2}
		if got, err := ParsePointKey(AppendPointKey(nil, want)); err != nil || got != want {
			t.Fatalf("point key of %q %q: got %+v, %v", device, metric, got, err)
		}
		if d, m, err := ParseUnitKey(AppendUnitKey(nil, device, metric)); err != nil || d != device || m != metric {
			t.Fatalf("unit key of %q %q: got %q %q, %v", device, metric, d, m, err)
		}
		if d, m, _, err := ParseBucketKey(AppendBucketKey(nil, device, metric, Sample{1, 2})); err != nil || d != device || m != metric {
			t.Fatalf("bucket key of %q %q: got %q %q, %v", device, metric, d, m, err)
		}
	})
}
