package payload

import (
	"math"
	"math/bits"
	"time"
)

// epochNanos converts a scanned non-negative number to nanoseconds since the
// epoch, choosing the unit by magnitude (see EpochMillisFrom). It truncates
// below a nanosecond and is exact: the 19 significant digits a numScan keeps
// reach below a nanosecond for every time in range. It returns a problem on
// failure.
func epochNanos(n numScan) (int64, string) {
	if n.mant == 0 {
		return 0, ""
	}
	if n.neg {
		return 0, "negative epoch time"
	}
	ip, ok := floorScaled(n.mant, n.exp)
	if !ok {
		return 0, "epoch time out of range"
	}
	digits := 9 // seconds
	switch {
	case ip >= EpochNanosFrom:
		digits = 0
	case ip >= EpochMicrosFrom:
		digits = 3
	case ip >= EpochMillisFrom:
		digits = 6
	}
	ns, ok := floorScaled(n.mant, n.exp+digits)
	if !ok || ns > math.MaxInt64 {
		return 0, "epoch time out of range"
	}
	return int64(ns), ""
}

// floorScaled returns ⌊m·10^e⌋ for m < 10^19, or false if that overflows.
func floorScaled(m uint64, e int) (uint64, bool) {
	switch {
	case e < -19:
		return 0, true
	case e < 0:
		return m / pow10u(-e), true
	case e > 19:
		return 0, false
	}
	hi, lo := bits.Mul64(m, pow10u(e))
	return lo, hi == 0
}

// pow10u returns 10^k for 0 <= k <= 19.
func pow10u(k int) uint64 {
	p := uint64(1)
	for ; k > 0; k-- {
		p *= 10
	}
	return p
}

// parseISOTime parses an RFC 3339 / ISO 8601 date-time,
// YYYY-MM-DD[Tt ]hh:mm:ss[.fraction][Z|z|±hh:mm|±hhmm], to nanoseconds since
// the epoch; a time without a zone is in zone, or UTC if zone is nil.
// Fractions beyond nanoseconds are truncated. It returns a problem on
// failure.
func parseISOTime(b []byte, zone *time.Location) (int64, string) {
	const syntax = "want an RFC 3339 time such as 2026-11-22T10:00:00Z"
	num := func(lo, hi int) int {
		v := 0
		for k := lo; k < hi; k++ {
			if k >= len(b) || !isDigit(b[k]) {
				return -1
			}
			v = v*10 + int(b[k]-'0')
		}
		return v
	}
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[13] != ':' || b[16] != ':' ||
		b[10] != 'T' && b[10] != 't' && b[10] != ' ' {
		return 0, syntax
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, min, sec := num(11, 13), num(14, 16), num(17, 19)
	if year < 0 || month < 0 || day < 0 || hour < 0 || min < 0 || sec < 0 {
		return 0, syntax
	}
	i, frac := 19, 0
	if i < len(b) && b[i] == '.' {
		n := 0
		for i++; i < len(b) && isDigit(b[i]); i++ {
			if n < 9 {
				frac = frac*10 + int(b[i]-'0')
			}
			n++
		}
		if n == 0 {
			return 0, syntax
		}
		for ; n < 9; n++ {
			frac *= 10
		}
	}
	offset, local := 0, i == len(b) && zone != nil
	if i < len(b) {
		switch b[i] {
		case 'Z', 'z':
			i++
		case '+', '-':
			neg, n := b[i] == '-', 5 // ±hhmm
			oh, om := num(i+1, i+3), num(i+3, i+5)
			if i+3 < len(b) && b[i+3] == ':' { // ±hh:mm
				om, n = num(i+4, i+6), 6
			}
			if oh < 0 || om < 0 || oh > 23 || om > 59 {
				return 0, syntax
			}
			if offset = (oh*60 + om) * 60; neg {
				offset = -offset
			}
			i += n
		default:
			return 0, syntax
		}
	}
	if i != len(b) {
		return 0, syntax
	}
	t := time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC)
	if month < 1 || int(t.Month()) != month || t.Day() != day || hour > 23 || min > 59 || sec > 59 {
		return 0, "date or time field out of range"
	}
	if local {
		t = time.Date(year, time.Month(month), day, hour, min, sec, 0, zone)
	}
	switch secs := t.Unix() - int64(offset); {
	case secs < 0:
		return 0, "time before 1970"
	case secs > math.MaxInt64/int64(1e9) || secs == math.MaxInt64/int64(1e9) && int64(frac) > math.MaxInt64%int64(1e9):
		return 0, "time after 2262"
	default:
		return secs*1e9 + int64(frac), ""
	}
}
