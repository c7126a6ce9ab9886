package aggregate

import (
	"fmt"
	"math"
	"time"
)

// Level is the length of the time records Stats are kept for: a record of
// a Level holds the readings of one whole UTC minute, hour or day. A record
// is named by its first nanosecond, a multiple of the Level's Duration
// since the epoch (Truncate). Levels are ordered from fine to coarse, and
// each Duration divides the next.
//
// Every method but String panics on a Level other than Minute, Hour and
// Day.
type Level int

// The levels. The zero Level is none of them.
const (
	Minute Level = iota + 1
	Hour
	Day
)

// Duration returns the length of a record of l. It panics if l is not
// Minute, Hour or Day.
func (l Level) Duration() time.Duration {
	switch l {
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	}
	panic(fmt.Sprintf("aggregate: invalid %v", l))
}

// Truncate returns the start of the record of l that holds ts: the largest
// multiple of l's Duration not above ts. Both are nanoseconds since the
// epoch; ts may be negative.
//
// The first record of the int64 range starts before math.MinInt64 (in
// 1677), which is not representable: for a ts in that partial record
// Truncate returns math.MinInt64, the earliest time there is. Cover never
// plans such a record. It panics if l is not Minute, Hour or Day.
func (l Level) Truncate(ts int64) int64 {
	d := int64(l.Duration())
	r := ts % d
	if r < 0 {
		r += d
	}
	if ts-r > ts { // wrapped around below math.MinInt64
		return math.MinInt64
	}
	return ts - r
}

// String returns "minute", "hour" or "day", the names ParseLevel accepts,
// and "Level(n)" for any other value.
func (l Level) String() string {
	switch l {
	case Minute:
		return "minute"
	case Hour:
		return "hour"
	case Day:
		return "day"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel returns the Level named s: "minute", "hour" or "day", in
// lower case. Any other s is an error.
func ParseLevel(s string) (Level, error) {
	for _, l := range []Level{Minute, Hour, Day} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown level %q: want minute, hour or day", s)
}

// floorDiv returns ⌊ts/d⌋ for d > 0. It does not overflow.
func floorDiv(ts, d int64) int64 {
	q := ts / d
	if ts%d < 0 {
		q--
	}
	return q
}

// ceilDiv returns ⌈ts/d⌉ for d > 0. It does not overflow.
func ceilDiv(ts, d int64) int64 {
	q := ts / d
	if ts%d > 0 {
		q++
	}
	return q
}
