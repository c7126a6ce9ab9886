package httpapi

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseTime_EdgesOfTime(t *testing.T) {
	unix := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixNano()
	}
	const noBound = math.MaxInt64
	tests := []struct {
		in       string
		from, to int64 // want; ignored where errFrom, errTo
		errFrom  bool  // as from: refused
		errTo    bool  // as to: refused
	}{
		{in: "0001-01-01T00:00:00Z", errFrom: true, errTo: true},
		{in: "1677-09-21T00:12:43Z", errFrom: true, errTo: true},
		{in: "1677-09-21T00:12:43.145224192Z", from: math.MinInt64, to: math.MinInt64},
		{in: "1677-09-21T00:12:44Z", from: unix("1677-09-21T00:12:44Z"), to: unix("1677-09-21T00:12:44Z")},
		{in: "1970-01-01T00:00:00Z", from: 0, to: 0},
		{in: "2262-04-11T23:47:16Z", from: unix("2262-04-11T23:47:16Z"), to: unix("2262-04-11T23:47:16Z")},
		{in: "2262-04-11T23:47:17Z", errFrom: true, to: noBound},
		{in: "2263-01-01T00:00:00Z", errFrom: true, to: noBound},
		{in: "9999-12-31T23:59:59Z", errFrom: true, to: noBound},
		// Integers by magnitude: seconds, milliseconds, microseconds,
		// nanoseconds.
		{in: "0", from: 0, to: 0},
		{in: "1764000000", from: 1764000000 * 1e9, to: 1764000000 * 1e9},
		{in: "9223372036", from: 9223372036 * 1e9, to: 9223372036 * 1e9},
		{in: "9223372037", errFrom: true, to: noBound}, // seconds after 2262
		{in: "99999999999", errFrom: true, to: noBound},
		{in: "100000000000", from: 100000000000 * 1e6, to: 100000000000 * 1e6},
		{in: "1764000000000", from: 1764000000000 * 1e6, to: 1764000000000 * 1e6},
		{in: "1764000000000000", from: 1764000000000000 * 1e3, to: 1764000000000000 * 1e3},
		{in: "1764000000000000000", from: 1764000000000000000, to: 1764000000000000000},
		{in: "9223372036854775807", from: math.MaxInt64, to: math.MaxInt64},
		{in: "9223372036854775808", errFrom: true, to: noBound},
		{in: "99999999999999999999999", errFrom: true, to: noBound},
		// Not a time.
		{in: "-1764000000", errFrom: true, errTo: true},
		{in: "1e9", errFrom: true, errTo: true},
		{in: "yesterday", errFrom: true, errTo: true},
		{in: "", errFrom: true, errTo: true},
	}
	for _, tt := range tests {
		for _, upper := range []bool{false, true} {
			got, err := parseTime(tt.in, upper, 0)
			wantErr, want := tt.errFrom, tt.from
			if upper {
				wantErr, want = tt.errTo, tt.to
			}
			switch {
			case wantErr && err == nil:
				t.Errorf("parseTime(%q, upper %v) = %d, want an error", tt.in, upper, got)
			case !wantErr && err != nil:
				t.Errorf("parseTime(%q, upper %v): %v", tt.in, upper, err)
			case !wantErr && got != want:
				t.Errorf("parseTime(%q, upper %v) = %d, want %d", tt.in, upper, got, want)
			}
			if errors.Is(err, errTimeRange) && !strings.Contains(err.Error(), "1677-09-21T00:12:43Z to 2262-04-11T23:47:16Z") {
				t.Errorf("parseTime(%q): %v; want the range in the message", tt.in, err)
			}
		}
	}
}

// FuzzParseTime checks that a time parameter is read exactly or refused:
// never a panic, never a time the store cannot hold but as "no upper
// bound", and an RFC 3339 time read as what time.Parse says.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"0", "1764000000", "1764000000000", "2026-11-22T10:00:00Z", "2263-01-01T00:00:00Z",
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999+14:00", "99999999999999999999", "2026-11-22T10:00:00.5-05:30",
		"now", "-1h", "now-24h", "now+1h30m", "-106751d", "now+", "-1x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, upper := range []bool{false, true} {
			ns, err := parseTime(s, upper, relNow)
			if err != nil {
				continue
			}
			if tm, perr := time.Parse(time.RFC3339Nano, s); perr == nil && ns != math.MaxInt64 && tm.UnixNano() != ns {
				t.Fatalf("parseTime(%q) = %d, time.Parse says %d", s, ns, tm.UnixNano())
			}
			if d, sign, ok := relativeTime(s); ok {
				if dur, _, ok := parseDuration(d); !ok || ns != relNow+int64(sign)*dur && ns != math.MaxInt64 {
					t.Fatalf("parseTime(%q) = %d, not %d from now", s, ns, sign)
				}
				continue
			}
			if ns == math.MaxInt64 && !upper {
				if v, perr := strconv.ParseUint(s, 10, 64); perr != nil || v != math.MaxInt64 {
					t.Fatalf("parseTime(%q) as from = no bound", s)
				}
			}
		}
	})
}

// relNow is the time that the tests' times from now count from.
var relNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano()

func TestParseTime_FromNow(t *testing.T) {
	h := int64(time.Hour)
	tests := []struct {
		in   string
		want int64
	}{
		{"now", relNow},
		{"-1h", relNow - h},
		{"-90m", relNow - 90*int64(time.Minute)},
		{"-7d", relNow - 7*24*h},
		{"-2w", relNow - 14*24*h},
		{"now-24h", relNow - 24*h},
		{"now+1h", relNow + h},
		{"-1h30m", relNow - 3*h/2},
		{"-1500ms", relNow - 1500*int64(time.Millisecond)},
		{"-30s", relNow - 30*int64(time.Second)},
		{"now-0s", relNow},
	}
	for _, tt := range tests {
		for _, upper := range []bool{false, true} {
			if got, err := parseTime(tt.in, upper, relNow); err != nil || got != tt.want {
				t.Errorf("parseTime(%q, upper %v) = %d, %v; want %d", tt.in, upper, got, err, tt.want)
			}
		}
	}
	// Not times: each is refused, the message naming the value.
	for _, in := range []string{"-1x", "now+", "now-", "-", "now-h", "+1h", "-1.5h", "-1h-1m", "now -1h", "now-1H",
		"nownow", "yesterday", "-1", "- 1h", "-1h ", "now-99999999999999999999x"} {
		for _, upper := range []bool{false, true} {
			got, err := parseTime(in, upper, relNow)
			if err == nil {
				t.Errorf("parseTime(%q, upper %v) = %d, want an error", in, upper, got)
			} else if !strings.Contains(err.Error(), strconv.Quote(in)) {
				t.Errorf("parseTime(%q): %v; want the value in the message", in, err)
			}
		}
	}
	// Beyond the times the store holds: refused as from, no bound as to.
	for _, in := range []string{"now+30000000w", "now+16000w", "now+12500w"} {
		if _, err := parseTime(in, false, relNow); !errors.Is(err, errTimeRange) {
			t.Errorf("parseTime(%q) as from: %v, want %v", in, err, errTimeRange)
		}
		if got, err := parseTime(in, true, relNow); err != nil || got != math.MaxInt64 {
			t.Errorf("parseTime(%q) as to = %d, %v; want no bound", in, got, err)
		}
	}
	for _, in := range []string{"-16000w", "now-99999999999999999999s", "-15251w"} {
		for _, upper := range []bool{false, true} {
			if _, err := parseTime(in, upper, relNow); !errors.Is(err, errTimeRange) {
				t.Errorf("parseTime(%q, upper %v): %v, want %v", in, upper, err, errTimeRange)
			}
		}
	}
}
