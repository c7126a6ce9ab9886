package buffer

import "time"

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
	// Unit is the unit of the series, as the device or its preset names it
	// ("°C", "kWh"), or "" if unknown. It is not a part of the reading: the
	// store keeps one unit per series, the last one a reading brought.
	Unit string
}

// Time returns the reading's timestamp as a time.Time in UTC.
func (r Reading) Time() time.Time { return time.Unix(0, r.TS).UTC() }
