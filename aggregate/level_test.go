package aggregate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// at returns the UTC time as nanoseconds since the epoch.
func at(year int, month time.Month, day, hour, min, sec, nsec int) int64 {
	return time.Date(year, month, day, hour, min, sec, nsec, time.UTC).UnixNano()
}

func TestLevel_Duration(t *testing.T) {
	for _, tc := range []struct {
		l    Level
		want time.Duration
	}{
		{Minute, time.Minute},
		{Hour, time.Hour},
		{Day, 24 * time.Hour},
	} {
		if got := tc.l.Duration(); got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.l, got, tc.want)
		}
	}
}

func TestLevel_DurationPanics(t *testing.T) {
	for _, l := range []Level{0, -1, Day + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%v.Duration(): got no panic", l)
				}
			}()
			l.Duration()
		}()
	}
}

func TestLevel_Truncate(t *testing.T) {
	// minNS is math.MinInt64 as a time: 1677-09-21T00:12:43.145224192Z.
	const minNS = math.MinInt64
	for _, tc := range []struct {
		name    string
		l       Level
		ts      int64
		want    int64
		clamped bool // whether want is math.MinInt64 by the clamp, not a multiple of the Duration
	}{
		{"epoch minute", Minute, 0, 0, false},
		{"epoch day", Day, 0, 0, false},
		{"1ns", Minute, 1, 0, false},
		{"-1ns minute", Minute, -1, -int64(time.Minute), false},
		{"-1ns hour", Hour, -1, -int64(time.Hour), false},
		{"-1ns day", Day, -1, at(1969, 12, 31, 0, 0, 0, 0), false},
		{"aligned negative", Hour, -3 * int64(time.Hour), -3 * int64(time.Hour), false},
		{"minute", Minute, at(2026, 11, 22, 10, 31, 59, 999999999), at(2026, 11, 22, 10, 31, 0, 0), false},
		{"hour", Hour, at(2026, 11, 22, 10, 31, 59, 999999999), at(2026, 11, 22, 10, 0, 0, 0), false},
		{"day", Day, at(2026, 11, 22, 10, 31, 59, 999999999), at(2026, 11, 22, 0, 0, 0, 0), false},
		{"day before 1970", Day, at(1900, 2, 28, 23, 59, 59, 1), at(1900, 2, 28, 0, 0, 0, 0), false},
		{"max minute", Minute, math.MaxInt64, at(2262, 4, 11, 23, 47, 0, 0), false},
		{"max day", Day, math.MaxInt64, at(2262, 4, 11, 0, 0, 0, 0), false},
		{"min minute", Minute, minNS, minNS, true},
		{"min day", Day, minNS, minNS, true},
		{"last of first partial minute", Minute, at(1677, 9, 21, 0, 12, 59, 999999999), minNS, true},
		{"first whole minute", Minute, at(1677, 9, 21, 0, 13, 0, 1), at(1677, 9, 21, 0, 13, 0, 0), false},
		{"first partial day", Day, at(1677, 9, 21, 23, 0, 0, 0), minNS, true},
		{"first whole day", Day, at(1677, 9, 22, 0, 0, 0, 0), at(1677, 9, 22, 0, 0, 0, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.l.Truncate(tc.ts)
			if got != tc.want {
				t.Errorf("%v.Truncate(%d): got %d, want %d", tc.l, tc.ts, got, tc.want)
			}
			if aligned := got%int64(tc.l.Duration()) == 0; aligned == tc.clamped {
				t.Errorf("got %d aligned %v, want %v", got, aligned, !tc.clamped)
			}
		})
	}
}

// TestLevel_TruncateLikeTime compares Truncate with time.Time.Truncate,
// which rounds down from the zero Time, a UTC midnight, on random times
// over the whole int64 range.
func TestLevel_TruncateLikeTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 10000 {
		ts := int64(rng.Uint64())
		if rng.IntN(2) == 0 {
			ts = rng.Int64N(4e18) - 2e18 // 1906 to 2033
		}
		for _, l := range []Level{Minute, Hour, Day} {
			got := l.Truncate(ts)
			want := time.Unix(0, ts).Truncate(l.Duration())
			if want.Before(time.Unix(0, math.MinInt64)) {
				// Not representable: clamped.
				if got != math.MinInt64 {
					t.Fatalf("%v.Truncate(%d): got %d, want math.MinInt64", l, ts, got)
				}
				continue
			}
			if got != want.UnixNano() {
				t.Fatalf("%v.Truncate(%d): got %d, want %d (%v)", l, ts, got, want.UnixNano(), want.UTC())
			}
			if again := l.Truncate(got); again != got {
				t.Fatalf("%v.Truncate(%d): got %d, want it unchanged", l, got, again)
			}
		}
	}
}

func TestParseLevel(t *testing.T) {
	for _, l := range []Level{Minute, Hour, Day} {
		got, err := ParseLevel(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLevel(%q): got %v, %v, want %v", l.String(), got, err, l)
		}
	}
	for _, s := range []string{"", "Minute", "DAY", "minutes", " hour", "week", "1h", "Level(1)"} {
		if got, err := ParseLevel(s); err == nil {
			t.Errorf("ParseLevel(%q): got %v, want an error", s, got)
		}
	}
}

func TestLevel_String(t *testing.T) {
	for _, tc := range []struct {
		l    Level
		want string
	}{
		{Minute, "minute"},
		{Hour, "hour"},
		{Day, "day"},
		{0, "Level(0)"},
		{-2, "Level(-2)"},
	} {
		if got := tc.l.String(); got != tc.want {
			t.Errorf("Level(%d): got %q, want %q", int(tc.l), got, tc.want)
		}
	}
}
