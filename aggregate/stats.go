// Package aggregate holds the pre-aggregates of sensor readings and the
// arithmetic of the time grid they live on. It is pure: no I/O, no
// goroutines, and every time is passed in.
//
// A Stats is the summary of a set of readings that CouchDB's (and
// Cloudant's) _stats reducer keeps: count, sum, min, max and sum of
// squares. Stats of disjoint sets merge into the Stats of their union, so
// the Stats of any time range can be assembled from stored records of
// whole minutes, hours and days (Level) plus the raw readings at its ends.
// Cover plans which records those are.
//
// A States is the aggregate of the readings of a text series (states such
// as "heat", events such as "single") in one record: per state, its count
// of readings and the time the series spent in it. The States of
// consecutive records merge, in time order, into the States of their
// union, exactly; TimeIn answers the time in each state over a range.
//
// Times are int64 nanoseconds since the Unix epoch, as in package time's
// UnixNano. Unix time has no leap seconds, so every UTC day is exactly 24
// hours long and the grid of records is plain integer arithmetic.
package aggregate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Stats summarizes a set of readings as the _stats reducer does. The zero
// Stats is empty: it summarizes no reading.
//
// Count, Min and Max are exact whatever the order readings are added or
// merged in. Sum and SumSqr are floating-point sums: their rounding depends
// on that order, with an absolute error of at most about n·ε·Σ|v| (Σv² for
// SumSqr) for n readings and ε = 2⁻⁵².
//
// Readings must be finite. Adding a NaN or an infinity is not supported: it
// may poison Sum, SumSqr, Min and Max for good, and merging such a Stats
// spreads the damage. A finite reading whose square overflows (|v| above
// about 1.3e154) makes SumSqr infinite.
type Stats struct {
	// Count is the number of readings.
	Count uint64
	// Sum is the sum of the readings.
	Sum float64
	// Min and Max are the smallest and the largest reading. They are
	// meaningless (and zero in the zero Stats) while Count is 0.
	Min, Max float64
	// SumSqr is the sum of the squares of the readings.
	SumSqr float64
}

// Add adds the reading v, which must be finite, to s. After the first Add
// to an empty Stats, Min and Max are v.
func (s *Stats) Add(v float64) {
	if s.Count == 0 {
		s.Min, s.Max = v, v
	} else {
		s.Min = min(s.Min, v)
		s.Max = max(s.Max, v)
	}
	s.Count++
	s.Sum += v
	// The conversion rounds v*v on its own, forbidding a fused
	// multiply-add: Add then rounds alike on every architecture, and
	// like the Merge of a single reading's Stats.
	s.SumSqr += float64(v * v)
}

// Merge adds the readings summarized by o to s, so that s summarizes the
// union of two disjoint sets of readings. Merging an empty Stats is a
// no-op; merging into an empty Stats copies o. Merge is associative and
// commutative exactly in Count, Min and Max, and up to floating-point
// rounding in Sum and SumSqr.
func (s *Stats) Merge(o Stats) {
	switch {
	case o.Count == 0:
		return
	case s.Count == 0:
		*s = o
		return
	}
	s.Count += o.Count
	s.Sum += o.Sum
	s.Min = min(s.Min, o.Min)
	s.Max = max(s.Max, o.Max)
	s.SumSqr += o.SumSqr
}

// IsEmpty reports whether s summarizes no reading (Count is 0).
func (s Stats) IsEmpty() bool { return s.Count == 0 }

// Mean returns the arithmetic mean of the readings, Sum/Count. It returns
// NaN for an empty Stats.
func (s Stats) Mean() float64 {
	if s.Count == 0 {
		return math.NaN()
	}
	return s.Sum / float64(s.Count)
}

// Variance returns the population variance of the readings, computed from
// the sums alone as the _stats reducer's consumers do:
//
//	(SumSqr - Sum²/Count) / Count
//
// (as SumSqr - Sum·Mean, which is the same value without the overflow of
// Sum² for large sums). A result below 0, which only rounding can produce,
// is returned as 0. It returns NaN for an empty Stats, 0 for a single
// reading, and +Inf or NaN once SumSqr has overflowed.
//
// The formula subtracts two sums of size about n·(mean² + variance), so
// its absolute error is up to a small multiple of n·ε·(mean² + variance)
// for n readings and ε = 2⁻⁵², a relative error of the order of
// n·ε·(1 + mean²/variance): with the spread small against the mean, digits
// are lost to cancellation. A day of per-second room temperatures (mean
// 20, σ 0.1) keeps at least 5 significant digits by that bound, typically
// 9; readings around 1e9 with σ ≈ 1 may keep none.
func (s Stats) Variance() float64 {
	if s.Count == 0 {
		return math.NaN()
	}
	n := float64(s.Count)
	v := (s.SumSqr - float64(s.Sum*(s.Sum/n))) / n // no fused multiply-add, as in Add
	if v < 0 {
		return 0
	}
	return v
}

// StdDev returns the population standard deviation of the readings, the
// square root of Variance, with its limits. It returns NaN for an empty
// Stats.
func (s Stats) StdDev() float64 { return math.Sqrt(s.Variance()) }

// Encoding of a Stats by Append: a version byte, then Count as a uint64
// and the bits (math.Float64bits) of Sum, Min, Max and SumSqr, in that
// order, all big-endian:
//
//	version(1) count(8) sum(8) min(8) max(8) sumsqr(8)
const (
	// statsVersion is the version byte of the encoding written by Append.
	statsVersion = 1
	// encodedLen is the length of every encoded Stats: 41 bytes.
	encodedLen = 1 + 8 + 4*8
)

// ErrBadStats is wrapped by the errors Decode returns for an input that is
// not an encoded Stats: of an unknown version or too long. Truncated input
// gives io.ErrUnexpectedEOF instead.
var ErrBadStats = errors.New("bad stats encoding")

// Append appends the encoding of s, 41 bytes, to dst and returns
// the extended slice. The encoding keeps every bit of every field, so
// Decode gives back s exactly (NaN payloads and negative zeros included).
func (s Stats) Append(dst []byte) []byte {
	dst = append(dst, statsVersion)
	dst = binary.BigEndian.AppendUint64(dst, s.Count)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(s.Sum))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(s.Min))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(s.Max))
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(s.SumSqr))
}

// Decode decodes a Stats encoded by Append. b must be exactly one encoding:
// Decode returns io.ErrUnexpectedEOF if b is empty or a truncated
// encoding, and an error wrapping ErrBadStats if b starts with an unknown
// version byte or is longer than an encoding. It checks the format, not the
// values: the fields are returned as they were appended. It never retains
// b.
func Decode(b []byte) (Stats, error) {
	if len(b) == 0 {
		return Stats{}, io.ErrUnexpectedEOF
	}
	if b[0] != statsVersion {
		return Stats{}, fmt.Errorf("%w: version %d, want %d", ErrBadStats, b[0], statsVersion)
	}
	if len(b) < encodedLen {
		return Stats{}, io.ErrUnexpectedEOF
	}
	if len(b) > encodedLen {
		return Stats{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadStats, len(b), encodedLen)
	}
	f := func(i int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[i:])) }
	return Stats{
		Count:  binary.BigEndian.Uint64(b[1:]),
		Sum:    f(9),
		Min:    f(17),
		Max:    f(25),
		SumSqr: f(33),
	}, nil
}
