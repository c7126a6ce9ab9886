package dashboard

import (
	"fmt"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// Range is one of the spans the page's charts offer, ending now.
type Range int

// The ranges. The zero Range is none of them.
const (
	Range1h Range = iota + 1
	Range24h
	Range7d
	Range90d
)

// Ranges returns every Range, shortest first: the page's buttons.
func Ranges() []Range { return []Range{Range1h, Range24h, Range7d, Range90d} }

// ParseRange returns the Range named s: "1h", "24h", "7d" or "90d". Any
// other s is an error.
func ParseRange(s string) (Range, error) {
	for _, r := range Ranges() {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown range %q: want 1h, 24h, 7d or 90d", s)
}

// String returns "1h", "24h", "7d" or "90d", the names ParseRange
// accepts, and "Range(n)" for any other value.
func (r Range) String() string {
	switch r {
	case Range1h:
		return "1h"
	case Range24h:
		return "24h"
	case Range7d:
		return "7d"
	case Range90d:
		return "90d"
	}
	return fmt.Sprintf("Range(%d)", int(r))
}

// Duration returns the length of r, or 0 for a value that is not a
// Range.
func (r Range) Duration() time.Duration {
	switch r {
	case Range1h:
		return time.Hour
	case Range24h:
		return 24 * time.Hour
	case Range7d:
		return 7 * day
	case Range90d:
		return 90 * day
	}
	return 0
}

// Level returns the level of the Stats records a chart of r is drawn
// from: minutes for 1h (60 records) and 24h (1,440, drawn as 144
// columns of 10 minutes), hours for 7d (168) and 90d (2,160, drawn as
// 180 columns of 12 hours). The records read are then at most a few
// thousand, and every column of the chart merges whole records.
// It returns 0 for a value that is not a Range.
func (r Range) Level() aggregate.Level {
	switch r {
	case Range1h, Range24h:
		return aggregate.Minute
	case Range7d, Range90d:
		return aggregate.Hour
	}
	return 0
}

// Raw reports whether a chart of r also draws the raw readings (Chart.
// Points): only for 1h, where a column is a minute and the readings
// within it say more than the minute's band.
func (r Range) Raw() bool { return r == Range1h }

// Window returns the times a chart of r ending at now spans.
func (r Range) Window(now time.Time) (from, to time.Time) {
	return now.Add(-r.Duration()), now
}
