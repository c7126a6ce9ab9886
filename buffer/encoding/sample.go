package encoding

import (
	"math"
	"time"
)

// Reading is one sample of one series: a device's metric at a point in time.
//
// Two readings are the same reading when Device, Metric, TS and Value are
// equal; the store keeps such a reading once, however often it is written.
// Two readings of one series with the same timestamp and different values
// are both kept.
type Reading struct {
	Device string
	Metric string
	// TS is the sample time in nanoseconds since the Unix epoch (UTC).
	TS    int64
	Value float64
	// Text is the value of a reading of a text series: a state ("heat",
	// "home") or an event ("single", "long_push"), at most MaxText bytes
	// of UTF-8. A reading whose Text is not "" is a text reading and its
	// Value is 0; one whose Text is "" is a number. A series holds one
	// kind, the kind of its first reading.
	Text string
	// Word is the state word a number reading was read from, as the
	// device wrote it ("off" for 0, "ON" for 1; see the decoders of
	// gateway/payload), or "". It is not a part of the reading: the store
	// keeps the number in a number series, and the word as the reading's
	// Text in a text series, so that a mode whose texts include "off" is
	// not refused as a number. A text reading's Word is "".
	Word string
	// Unit is the unit of the series, as the device or its preset names it
	// ("°C", "kWh"), or "" if unknown. It is not a part of the reading: the
	// store keeps one unit per series, the last one a reading brought.
	Unit string
}

// MaxText is the longest text value a reading may hold, in bytes.
const MaxText = 64

// IsText reports whether r is a text reading.
func (r *Reading) IsText() bool { return r.Text != "" }

// Time returns the reading's timestamp as a time.Time in UTC.
func (r Reading) Time() time.Time { return time.Unix(0, r.TS).UTC() }

// Sample is one timestamped value of a series.
type Sample struct {
	// TS is the sample time in nanoseconds since the Unix epoch (UTC).
	TS    int64
	Value float64
}

// Less reports whether a sorts before b in a series: by time, then by the
// value's bits, the order of point and bucket keys and of the samples of
// a bucket.
func (a Sample) Less(b Sample) bool {
	if a.TS != b.TS {
		return a.TS < b.TS
	}
	return math.Float64bits(a.Value) < math.Float64bits(b.Value)
}

// Same reports whether a and b are the same sample, bit for bit.
func (a Sample) Same(b Sample) bool {
	return a.TS == b.TS && math.Float64bits(a.Value) == math.Float64bits(b.Value)
}
