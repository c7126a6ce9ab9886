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
			got, err := parseTime(tt.in, upper)
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
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999+14:00", "99999999999999999999", "2026-11-22T10:00:00.5-05:30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, upper := range []bool{false, true} {
			ns, err := parseTime(s, upper)
			if err != nil {
				continue
			}
			if tm, perr := time.Parse(time.RFC3339Nano, s); perr == nil && ns != math.MaxInt64 && tm.UnixNano() != ns {
				t.Fatalf("parseTime(%q) = %d, time.Parse says %d", s, ns, tm.UnixNano())
			}
			if ns == math.MaxInt64 && !upper {
				if v, perr := strconv.ParseUint(s, 10, 64); perr != nil || v != math.MaxInt64 {
					t.Fatalf("parseTime(%q) as from = no bound", s)
				}
			}
		}
	})
}
