package httpapi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/gateway/payload"
)

// The times a query can name: those of an int64 of nanoseconds since the
// epoch, as the store keeps them.
var (
	minQueryTime = time.Unix(0, math.MinInt64).UTC()
	maxQueryTime = time.Unix(0, math.MaxInt64).UTC()
)

// errTimeRange says which times a query may name.
var errTimeRange = fmt.Errorf("outside the times the store can hold (%s to %s)",
	minQueryTime.Format(time.RFC3339), maxQueryTime.Format(time.RFC3339))

// timeForms says what a time parameter takes.
const timeForms = "want RFC 3339 (2026-11-22T10:00:00Z), Unix seconds or milliseconds, now, " +
	"or a time from now (-1h, -90m, -7d, now-24h, now+1h; units ms s m h d w)"

// parseTime reads a time parameter, in nanoseconds since the epoch: RFC
// 3339; a non-negative integer of Unix seconds, milliseconds,
// microseconds or nanoseconds told apart by its magnitude as payload
// timestamps are (payload.EpochMillisFrom); or a time from now, in
// nanoseconds since the epoch: "now", "now-DURATION", "now+DURATION" or
// "-DURATION" (before now), a DURATION being one or more whole numbers
// each with a unit (ms, s, m, h, d for 24 hours, w for 7 days): "90m",
// "1h30m". A time after what the store can hold is math.MaxInt64 when
// upper (for "to": no upper bound), else an error, as is one before it.
func parseTime(s string, upper bool, now int64) (int64, error) {
	beyond := func() (int64, error) {
		if upper {
			return math.MaxInt64, nil
		}
		return 0, fmt.Errorf("%q: %w", s, errTimeRange)
	}
	if s != "" && '0' <= s[0] && s[0] <= '9' && strings.Trim(s, "0123456789") == "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return beyond() // more digits than any time the store holds
		}
		unit := uint64(time.Second)
		switch {
		case v >= payload.EpochNanosFrom:
			unit = 1
		case v >= payload.EpochMicrosFrom:
			unit = uint64(time.Microsecond)
		case v >= payload.EpochMillisFrom:
			unit = uint64(time.Millisecond)
		}
		if v > math.MaxInt64/unit {
			return beyond()
		}
		return int64(v * unit), nil
	}
	if rel, sign, ok := relativeTime(s); ok {
		d, long, ok := parseDuration(rel)
		switch {
		case !ok:
			return 0, fmt.Errorf("%q: %s", s, timeForms)
		case long && sign > 0:
			return beyond()
		case long:
			return 0, fmt.Errorf("%q: %w", s, errTimeRange)
		case sign < 0 && now < math.MinInt64+d:
			return 0, fmt.Errorf("%q: %w", s, errTimeRange)
		case sign > 0 && now > math.MaxInt64-d:
			return beyond()
		}
		return now + int64(sign)*d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q: %s", s, timeForms)
	}
	switch {
	case t.After(maxQueryTime):
		return beyond()
	case t.Before(minQueryTime):
		return 0, fmt.Errorf("%q: %w", s, errTimeRange)
	}
	return t.UnixNano(), nil
}

// relativeTime splits a time from now into its duration and its sign
// (-1 before now, +1 after, 0 for now itself), and reports whether s is
// one.
func relativeTime(s string) (dur string, sign int, ok bool) {
	if s == "now" {
		return "0s", 0, true
	}
	rest, now := strings.CutPrefix(s, "now")
	switch {
	case strings.HasPrefix(rest, "-"):
		return rest[1:], -1, true
	case now && strings.HasPrefix(rest, "+"):
		return rest[1:], 1, true
	}
	return "", 0, false
}

// durationUnits are the units of a duration from now, longest name first
// where one begins another.
var durationUnits = []struct {
	name string
	ns   int64
}{
	{"ms", int64(time.Millisecond)},
	{"s", int64(time.Second)},
	{"m", int64(time.Minute)},
	{"h", int64(time.Hour)},
	{"d", 24 * int64(time.Hour)},
	{"w", 7 * 24 * int64(time.Hour)},
}

// parseDuration reads a duration of a time from now: one or more whole
// numbers, each followed by a unit of durationUnits ("7d", "1h30m"), in
// nanoseconds. It reports whether s is one (ok), and whether it is
// longer than an int64 of nanoseconds holds (long: then d is 0).
func parseDuration(s string) (d int64, long, ok bool) {
	if s == "" {
		return 0, false, false
	}
	var total int64
	for s != "" {
		i := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, false, false
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			n, long = 0, true // all digits: too many
		}
		s = s[i:]
		unit := int64(0)
		for _, u := range durationUnits {
			if rest, ok := strings.CutPrefix(s, u.name); ok && (rest == "" || '0' <= rest[0] && rest[0] <= '9') {
				unit, s = u.ns, rest
				break
			}
		}
		if unit == 0 {
			return 0, false, false
		}
		if long || n > (math.MaxInt64-total)/unit {
			long, total = true, 0
			continue
		}
		total += n * unit
	}
	return total, long, true
}
