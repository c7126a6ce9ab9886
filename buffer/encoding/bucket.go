package encoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
)

// A bucket is the sealed, compact form of up to maxBucketSamples samples of
// one series, sorted by timestamp and then by value bits. Its encoding is
// described byte by byte in docs/storage.md ("Bucket encoding"):
//
//	header  kind(1) count unit(1) first span min max
//	body    timestamp parameters, value parameters, then one bit stream:
//	        count-1 timestamp codes, then the values' codes
//
// Timestamps are stored in the largest unit 10^u ns that divides all of
// them, as each delta less the bucket's smallest delta. Values are stored as
// deltas of decimal-scaled integers when every value of the bucket is
// exactly m/10^k (BucketDecimal), else with Gorilla's XOR scheme
// (BucketFloat). Each stream of integers is written in an Exp-Golomb code or
// a fixed width, whichever the bucket's integers fit best (intCode). Every
// bit pattern of every value and every timestamp round-trips.

// maxBucketSamples is the most samples a bucket holds.
const maxBucketSamples = math.MaxUint16

// BucketKind is the first byte of an encoded bucket. It names the version
// of the format and how the values are encoded; the timestamps are encoded
// the same way in every kind.
type BucketKind byte

const (
	// BucketDecimal stores every value v as an integer m with
	// v == float64(m)/10^scale, bitwise: the first m, then the zigzagged
	// deltas of consecutive m. No NaN, ±Inf or -0 is such a value.
	BucketDecimal BucketKind = 0x01
	// BucketFloat stores the values' bits with Gorilla's XOR scheme: the
	// first value raw, then each value XORed with the previous one.
	BucketFloat BucketKind = 0x02
)

func (k BucketKind) String() string {
	switch k {
	case BucketDecimal:
		return "decimal"
	case BucketFloat:
		return "float"
	}
	return fmt.Sprintf("BucketKind(0x%02x)", byte(k))
}

const (
	// maxScale is the largest decimal scale k tried for a bucket.
	maxScale = 15
	// maxScaled bounds |m| of decimal values, so that m is exact in a
	// float64 and m/10^k is a correctly rounded division.
	maxScaled = 1 << 53
	// maxTSUnit is the largest timestamp unit exponent: 10^18 ns.
	maxTSUnit = 18
)

// ErrBadBucket is wrapped by every error DecodeBucket and ParseBucketHeader
// return for an encoding that is corrupt or of an unknown kind. Truncated
// input gives io.ErrUnexpectedEOF instead.
var ErrBadBucket = errors.New("bad bucket")

// BucketHeader is the part of an encoded bucket that describes it without
// decoding its samples.
type BucketHeader struct {
	Kind  BucketKind
	Count int
	// First and Last are the first and the last timestamp.
	First, Last int64
	// Min and Max are the smallest and largest value that is not NaN; -0
	// counts as smaller than +0. Both are NaN if every value is NaN.
	Min, Max float64

	size   int   // encoded length of the header in bytes
	unit   int64 // timestamps are multiples of unit = 10^u ns
	scale  int   // BucketDecimal: values are m/10^scale
	minM   int64 // BucketDecimal: m of Min and Max
	maxM   int64
	firstU int64 // First/unit
}

// AppendBucket appends the encoding of samples to dst and returns the
// extended buffer. samples must hold 1 to 65535 (maxBucketSamples) samples
// sorted by TS and, among equal timestamps, by math.Float64bits of the
// value (Sample.Less, equal samples allowed); if not, AppendBucket returns
// dst unchanged and an error. It allocates only to grow dst.
func AppendBucket(dst []byte, samples []Sample) ([]byte, error) {
	h, err := summarize(samples)
	if err != nil {
		return dst, err
	}
	dst = appendBucketHeader(dst, h)
	many := len(samples) > 1
	var minDelta uint64
	var tsCode, valueCode intCode
	if many {
		minDelta, tsCode = timestampCode(samples, h.unit)
		dst = binary.AppendUvarint(dst, minDelta)
		dst = append(dst, byte(tsCode))
	}
	p := math.Pow10(h.scale)
	if h.Kind == BucketDecimal {
		dst = binary.AppendUvarint(dst, uint64(scaledOf(samples[0].Value, p)-h.minM))
		if many {
			valueCode = decimalCode(samples, p)
			dst = append(dst, byte(valueCode))
		}
	}
	w := bitWriter{b: dst}
	for i := 1; i < len(samples); i++ {
		w.writeInt(inUnits(uint64(samples[i].TS)-uint64(samples[i-1].TS), h.unit)-minDelta, tsCode)
	}
	if h.Kind == BucketFloat {
		writeXOR(&w, samples)
		return w.finish(), nil
	}
	prev := scaledOf(samples[0].Value, p)
	for _, s := range samples[1:] {
		m := scaledOf(s.Value, p)
		w.writeInt(zigzag(m-prev), valueCode)
		prev = m
	}
	return w.finish(), nil
}

// summarize checks samples and returns the header of their bucket.
func summarize(samples []Sample) (BucketHeader, error) {
	n := len(samples)
	if n == 0 {
		return BucketHeader{}, errors.New("append bucket: no samples")
	}
	if n > maxBucketSamples {
		return BucketHeader{}, fmt.Errorf("append bucket: %d samples, more than %d", n, maxBucketSamples)
	}
	h := BucketHeader{
		Kind:  BucketFloat,
		Count: n,
		First: samples[0].TS,
		Last:  samples[n-1].TS,
		Min:   math.NaN(),
		Max:   math.NaN(),
	}
	for i, s := range samples {
		if i > 0 && !sampleOrdered(samples[i-1], s) {
			return BucketHeader{}, fmt.Errorf("append bucket: sample %d (ts %d, value %v) sorts before sample %d (ts %d, value %v)",
				i, s.TS, s.Value, i-1, samples[i-1].TS, samples[i-1].Value)
		}
		h.Min, h.Max = widen(h.Min, h.Max, s.Value)
	}
	h.unit = timestampUnit(samples)
	h.firstU = h.First / h.unit
	if scale, ok := decimalScale(samples); ok {
		p := math.Pow10(scale)
		h.Kind, h.scale = BucketDecimal, scale
		h.minM, h.maxM = scaledOf(h.Min, p), scaledOf(h.Max, p)
	}
	return h, nil
}

// timestampUnit returns the largest power of ten, up to 10^maxTSUnit, that
// divides every timestamp of samples, which are sorted.
func timestampUnit(samples []Sample) int64 {
	unit := int64(1e18)
	for samples[0].TS%unit != 0 {
		unit /= 10
	}
	t0 := uint64(samples[0].TS)
	for _, s := range samples[1:] {
		d := uint64(s.TS) - t0
		for inUnits(d, unit)*uint64(unit) != d {
			unit /= 10
		}
	}
	return unit
}

// sampleOrdered reports whether a may precede b in a bucket.
func sampleOrdered(a, b Sample) bool {
	return a.TS < b.TS || a.TS == b.TS && math.Float64bits(a.Value) <= math.Float64bits(b.Value)
}

// widen returns lo and hi widened to include v. NaN is skipped, a NaN lo or
// hi stands for "no value yet", and -0 counts as less than +0.
func widen(lo, hi, v float64) (float64, float64) {
	if v != v {
		return lo, hi
	}
	if lo != lo || v < lo || v == lo && math.Signbit(v) {
		lo = v
	}
	if hi != hi || v > hi || v == hi && !math.Signbit(v) {
		hi = v
	}
	return lo, hi
}

// decimalScale returns the smallest k ≤ maxScale such that every value is
// exactly float64(m)/10^k for an integer m with |m| ≤ maxScaled, and
// whether there is one.
func decimalScale(samples []Sample) (int, bool) {
	k, p := 0, 1.0
	unchecked := 0 // samples[:unchecked] were checked at a smaller scale
	for i, s := range samples {
		for !isScaled(s.Value, p) {
			if k == maxScale {
				return 0, false
			}
			k, p, unchecked = k+1, p*10, i
		}
	}
	// A value exact at a smaller scale is exact at k too unless its m grew
	// past maxScaled; the codec must be lossless, so check.
	for _, s := range samples[:unchecked] {
		if !isScaled(s.Value, p) {
			return 0, false
		}
	}
	return k, true
}

// isScaled reports whether v == float64(m)/p, bitwise, for m = round(v*p)
// with |m| ≤ maxScaled. It is false for NaN, ±Inf and -0.
func isScaled(v, p float64) bool {
	x := v * p
	if !(math.Abs(x) <= maxScaled) {
		return false
	}
	return math.Float64bits(float64(int64(math.Round(x)))/p) == math.Float64bits(v)
}

// scaledOf returns m of a value v for which isScaled(v, p) holds.
func scaledOf(v, p float64) int64 { return int64(math.Round(v * p)) }

// inUnits returns d/unit for the common units without a division
// instruction.
func inUnits(d uint64, unit int64) uint64 {
	switch unit {
	case 1:
		return d
	case 1e3:
		return d / 1e3
	case 1e6:
		return d / 1e6
	case 1e9:
		return d / 1e9
	}
	return d / uint64(unit)
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// timestampCode returns the smallest delta between timestamps, in units,
// and the code for the deltas less that smallest delta.
func timestampCode(samples []Sample, unit int64) (minDelta uint64, code intCode) {
	minDelta = math.MaxUint64
	for i := 1; i < len(samples); i++ {
		minDelta = min(minDelta, uint64(samples[i].TS)-uint64(samples[i-1].TS))
	}
	var hist [65]int
	for i := 1; i < len(samples); i++ {
		d := uint64(samples[i].TS) - uint64(samples[i-1].TS)
		hist[bits.Len64(inUnits(d-minDelta, unit))]++
	}
	return inUnits(minDelta, unit), chooseCode(&hist, len(samples)-1)
}

// decimalCode returns the code for the zigzagged deltas of the scaled
// values.
func decimalCode(samples []Sample, p float64) intCode {
	var hist [65]int
	prev := scaledOf(samples[0].Value, p)
	for _, s := range samples[1:] {
		m := scaledOf(s.Value, p)
		hist[bits.Len64(zigzag(m-prev))]++
		prev = m
	}
	return chooseCode(&hist, len(samples)-1)
}

// intCode says how a stream of unsigned integers is written, in one byte:
// 0 to 64 is the order k of an Exp-Golomb code (see writeEG), and
// fixedWidth|w writes every integer in w bits, w ≤ 64. Fixed width 0 writes
// a stream of zeros, such as the deltas of a constant series, in no bits.
type intCode byte

const fixedWidth intCode = 0x80

func (c intCode) valid() bool { return c <= 64 || c >= fixedWidth && c <= fixedWidth+64 }

// minBits returns the fewest bits an integer takes with code c.
func (c intCode) minBits() int {
	if c&fixedWidth != 0 {
		return int(c &^ fixedWidth)
	}
	return 1
}

// chooseCode returns the code that writes n integers, hist[l] of which
// are l bits long, in about the fewest bits. An Exp-Golomb code of order k
// takes k+1 bits for an integer of l ≤ k bits and 2l-k±1 for a longer one:
// one more order saves a bit on each longer integer and costs one on each
// other, so the best k is the median length. A fixed width is the longest
// length; it wins for evenly spread integers and for all zeros.
func chooseCode(hist *[65]int, n int) intCode {
	k, sum := 64, 0
	for l, c := range hist {
		if sum += c; 2*sum >= n {
			k = l
			break
		}
	}
	eg, widest := 0, 0
	for l, c := range hist {
		if c == 0 {
			continue
		}
		widest = l
		if l <= k {
			eg += c * (k + 1)
		} else {
			eg += c * (2*l - k)
		}
	}
	if widest*n <= eg {
		return fixedWidth | intCode(widest)
	}
	return intCode(k)
}

// writeXOR writes the values of samples with Gorilla's XOR scheme: the
// first value's 64 bits, then for each next value x = bits ^ previous bits:
//
//	'0'                       x == 0
//	'10' bits                 x's meaningful bits fit the previous window
//	'11' lead(5) len-1(6) bits a new window of len bits after lead zeros
func writeXOR(w *bitWriter, samples []Sample) {
	prev := math.Float64bits(samples[0].Value)
	w.writeBits(prev, 64)
	lead, n := uint(0), uint(0) // the window: n bits after lead zeros; none if n == 0
	for _, s := range samples[1:] {
		cur := math.Float64bits(s.Value)
		x := cur ^ prev
		prev = cur
		if x == 0 {
			w.writeBits(0, 1)
			continue
		}
		lz, tz := uint(bits.LeadingZeros64(x)), uint(bits.TrailingZeros64(x))
		if n > 0 && lz >= lead && tz >= 64-lead-n {
			w.writeBits(0b10, 2)
			w.writeBits(x>>(64-lead-n), n)
			continue
		}
		lead = min(lz, 31)
		n = 64 - lead - tz
		w.writeBits(0b11<<11|uint64(lead)<<6|uint64(n-1), 13)
		w.writeBits(x>>tz, n)
	}
}

// appendBucketHeader appends the header h to dst.
func appendBucketHeader(dst []byte, h BucketHeader) []byte {
	dst = append(dst, byte(h.Kind))
	dst = binary.AppendUvarint(dst, uint64(h.Count))
	u := 0
	for p := h.unit; p > 1; p /= 10 {
		u++
	}
	dst = append(dst, byte(u))
	dst = binary.AppendVarint(dst, h.firstU)
	dst = binary.AppendUvarint(dst, (uint64(h.Last)-uint64(h.First))/uint64(h.unit))
	if h.Kind == BucketDecimal {
		dst = append(dst, byte(h.scale))
		dst = binary.AppendVarint(dst, h.minM)
		return binary.AppendUvarint(dst, uint64(h.maxM-h.minM))
	}
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(h.Min))
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(h.Max))
}

// ParseBucketHeader parses the header of an encoded bucket without
// decoding its samples. It returns io.ErrUnexpectedEOF if b is shorter than
// the header and an error wrapping ErrBadBucket if the header is corrupt.
func ParseBucketHeader(b []byte) (BucketHeader, error) {
	r := byteCursor{b: b}
	h := BucketHeader{Kind: BucketKind(r.byte())}
	if r.err == nil && h.Kind != BucketDecimal && h.Kind != BucketFloat {
		return BucketHeader{}, fmt.Errorf("%w: unknown kind 0x%02x", ErrBadBucket, byte(h.Kind))
	}
	count, u := r.uvarint(), r.byte()
	h.firstU = r.varint()
	span := r.uvarint()
	if h.Kind == BucketDecimal {
		h.scale = int(r.byte())
		h.minM = r.varint()
		h.maxM = int64(r.uvarint()) // the range until checked below
	} else {
		h.Min = math.Float64frombits(r.uint64())
		h.Max = math.Float64frombits(r.uint64())
	}
	if r.err != nil {
		return BucketHeader{}, r.err
	}
	h.size = len(b) - len(r.b)
	switch {
	case count == 0 || count > maxBucketSamples:
		return BucketHeader{}, fmt.Errorf("%w: count %d", ErrBadBucket, count)
	case u > maxTSUnit:
		return BucketHeader{}, fmt.Errorf("%w: timestamp unit 10^%d", ErrBadBucket, u)
	}
	h.Count = int(count)
	h.unit = int64(math.Pow10(int(u)))
	lo, hi := math.MinInt64/h.unit, math.MaxInt64/h.unit
	if h.firstU < lo || h.firstU > hi || span > uint64(hi)-uint64(h.firstU) || count == 1 && span != 0 {
		return BucketHeader{}, fmt.Errorf("%w: timestamps %d+%d out of range in unit 10^%d", ErrBadBucket, h.firstU, span, u)
	}
	h.First = h.firstU * h.unit
	h.Last = int64(uint64(h.firstU)+span) * h.unit
	if h.Kind == BucketDecimal {
		rng := uint64(h.maxM)
		if h.scale > maxScale || h.minM < -maxScaled || h.minM > maxScaled || rng > uint64(maxScaled-h.minM) {
			return BucketHeader{}, fmt.Errorf("%w: decimal range %d+%d at scale %d", ErrBadBucket, h.minM, rng, h.scale)
		}
		h.maxM = h.minM + int64(rng)
		p := math.Pow10(h.scale)
		h.Min, h.Max = float64(h.minM)/p, float64(h.maxM)/p
	}
	return h, nil
}

// DecodeBucket decodes the bucket b, appends its samples to dst and returns
// the extended slice. It returns io.ErrUnexpectedEOF if b is truncated and
// an error wrapping ErrBadBucket if b is corrupt or of an unknown kind; on
// error dst is returned unchanged. It makes room for the samples only once
// b is known to hold their bits: as a series of equally spaced equal values
// takes no bits per sample, that is up to 65535 samples (1 MiB) for a
// header and a few bytes. It allocates only to grow dst.
func DecodeBucket(dst []Sample, b []byte) ([]Sample, error) {
	h, err := ParseBucketHeader(b)
	if err != nil {
		return dst, err
	}
	body, err := parseBucketBody(h, b[h.size:])
	if err != nil {
		return dst, err
	}
	perSample := body.tsCode.minBits() + 1 // an XOR code takes 1 bit or more
	if h.Kind == BucketDecimal {
		perSample += body.valueCode.minBits() - 1
	}
	if uint64(h.Count-1)*uint64(perSample) > 8*uint64(len(body.bits)) {
		return dst, io.ErrUnexpectedEOF
	}
	base := len(dst)
	out := slices.Grow(dst, h.Count)[:base+h.Count]
	if err := decodeSamples(out[base:], h, body); err != nil {
		return dst, err
	}
	return out, nil
}

// bucketBody is the byte-aligned start of a bucket's body and its bit
// stream.
type bucketBody struct {
	minDelta  uint64  // smallest timestamp delta, in units
	tsCode    intCode // code of the timestamp deltas less minDelta
	firstM    int64   // BucketDecimal: m of the first value
	valueCode intCode // BucketDecimal: code of the zigzagged deltas of m
	bits      []byte
}

func parseBucketBody(h BucketHeader, b []byte) (bucketBody, error) {
	c := byteCursor{b: b}
	var body bucketBody
	var firstOff uint64
	if h.Count > 1 {
		body.minDelta, body.tsCode = c.uvarint(), intCode(c.byte())
	}
	if h.Kind == BucketDecimal {
		firstOff = c.uvarint()
		if h.Count > 1 {
			body.valueCode = intCode(c.byte())
		}
	}
	switch {
	case c.err != nil:
		return body, c.err
	case !body.tsCode.valid() || !body.valueCode.valid():
		return body, fmt.Errorf("%w: integer codes 0x%02x, 0x%02x", ErrBadBucket, byte(body.tsCode), byte(body.valueCode))
	case h.Kind == BucketDecimal && firstOff > uint64(h.maxM-h.minM):
		return body, fmt.Errorf("%w: first value %d+%d out of range", ErrBadBucket, h.minM, firstOff)
	}
	body.firstM = h.minM + int64(firstOff)
	body.bits = c.b
	return body, nil
}

// decodeSamples decodes the body of a bucket with header h into out, which
// has h.Count samples.
func decodeSamples(out []Sample, h BucketHeader, body bucketBody) error {
	r := bitReader{b: body.bits}
	if err := readTimestamps(&r, out, h, body.minDelta, body.tsCode); err != nil {
		return err
	}
	var err error
	if h.Kind == BucketDecimal {
		err = readDecimals(&r, out, h, body.firstM, body.valueCode)
	} else {
		err = readXOR(&r, out, h)
	}
	if err != nil {
		return err
	}
	for i := 1; i < len(out); i++ {
		if !sampleOrdered(out[i-1], out[i]) {
			return fmt.Errorf("%w: sample %d out of order", ErrBadBucket, i)
		}
	}
	return r.done()
}

func readTimestamps(r *bitReader, out []Sample, h BucketHeader, minDelta uint64, code intCode) error {
	hi := uint64(math.MaxInt64 / h.unit)
	t := uint64(h.firstU) // in units; int64 arithmetic modulo 2^64
	out[0].TS = h.First
	for i := 1; i < len(out); i++ {
		res, err := r.readInt(code)
		if err != nil {
			return err
		}
		d := minDelta + res
		if d < minDelta || d > hi-t {
			return fmt.Errorf("%w: timestamp %d out of range", ErrBadBucket, i)
		}
		t += d
		out[i].TS = int64(t) * h.unit
	}
	if last := out[len(out)-1].TS; last != h.Last {
		return fmt.Errorf("%w: last timestamp %d, header says %d", ErrBadBucket, last, h.Last)
	}
	return nil
}

func readDecimals(r *bitReader, out []Sample, h BucketHeader, m int64, code intCode) error {
	p := math.Pow10(h.scale)
	out[0].Value = float64(m) / p
	lo, hi := m, m
	for i := 1; i < len(out); i++ {
		z, err := r.readInt(code)
		if err != nil {
			return err
		}
		d := unzigzag(z)
		if d < h.minM-m || d > h.maxM-m {
			return fmt.Errorf("%w: value %d out of the header's range", ErrBadBucket, i)
		}
		m += d
		lo, hi = min(lo, m), max(hi, m)
		out[i].Value = float64(m) / p
	}
	if lo != h.minM || hi != h.maxM {
		return fmt.Errorf("%w: values span %d..%d, header says %d..%d", ErrBadBucket, lo, hi, h.minM, h.maxM)
	}
	return nil
}

// readXOR reads values written by writeXOR.
func readXOR(r *bitReader, out []Sample, h BucketHeader) error {
	prev, err := r.readBits(64)
	if err != nil {
		return err
	}
	out[0].Value = math.Float64frombits(prev)
	lo, hi := widen(math.NaN(), math.NaN(), out[0].Value)
	lead, n := uint(0), uint(0) // as in writeXOR
	for i := 1; i < len(out); i++ {
		x, err := readXORCode(r, &lead, &n)
		if err != nil {
			return err
		}
		prev ^= x
		out[i].Value = math.Float64frombits(prev)
		lo, hi = widen(lo, hi, out[i].Value)
	}
	if math.Float64bits(lo) != math.Float64bits(h.Min) || math.Float64bits(hi) != math.Float64bits(h.Max) {
		return fmt.Errorf("%w: values span %v..%v, header says %v..%v", ErrBadBucket, lo, hi, h.Min, h.Max)
	}
	return nil
}

// readXORCode reads the code of one value after the first and returns the
// XOR of its bits with the previous value's. lead and n are the window.
func readXORCode(r *bitReader, lead, n *uint) (uint64, error) {
	c, err := r.readBits(1)
	if err != nil || c == 0 {
		return 0, err
	}
	if c, err = r.readBits(1); err != nil {
		return 0, err
	}
	if c == 1 {
		w, err := r.readBits(11)
		if err != nil {
			return 0, err
		}
		*lead, *n = uint(w>>6), uint(w&63)+1
		if *lead+*n > 64 {
			return 0, fmt.Errorf("%w: XOR window of %d+%d bits", ErrBadBucket, *lead, *n)
		}
	} else if *n == 0 {
		return 0, fmt.Errorf("%w: XOR window used before it is set", ErrBadBucket)
	}
	x, err := r.readBits(*n)
	return x << (64 - *lead - *n), err
}
