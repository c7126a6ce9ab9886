package httpapi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/gateway"
)

var (
	minQueryTime = time.Unix(0, math.MinInt64).UTC()
	maxQueryTime = time.Unix(0, math.MaxInt64).UTC()
)

// errTimeRange says which times a query may name.
var errTimeRange = fmt.Errorf("outside the times the store can hold (%s to %s)",
	minQueryTime.Format(time.RFC3339), maxQueryTime.Format(time.RFC3339))

// parseTime reads a time parameter, in nanoseconds since the epoch: RFC
// 3339, or a non-negative integer of Unix seconds, milliseconds,
// microseconds or nanoseconds told apart by its magnitude as payload
// timestamps are (gateway.EpochMillisFrom). A time after what the store can hold
// is math.MaxInt64 when upper (for "to": no upper bound), else an error,
// as is one before it.
func parseTime(s string, upper bool) (int64, error) {
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
		case v >= gateway.EpochNanosFrom:
			unit = 1
		case v >= gateway.EpochMicrosFrom:
			unit = uint64(time.Microsecond)
		case v >= gateway.EpochMillisFrom:
			unit = uint64(time.Millisecond)
		}
		if v > math.MaxInt64/unit {
			return beyond()
		}
		return int64(v * unit), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q: want RFC 3339 (2026-11-22T10:00:00Z) or Unix seconds or milliseconds", s)
	}
	switch {
	case t.After(maxQueryTime):
		return beyond()
	case t.Before(minQueryTime):
		return 0, fmt.Errorf("%q: %w", s, errTimeRange)
	}
	return t.UnixNano(), nil
}
