package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// sortSamples sorts samples as a bucket needs them.
func sortSamples(s []Sample) {
	slices.SortFunc(s, func(a, b Sample) int {
		if a.TS != b.TS {
			return cmpInt(a.TS, b.TS)
		}
		return cmpInt(math.Float64bits(a.Value), math.Float64bits(b.Value))
	})
}

func cmpInt[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sampleDiff describes the first difference between got and want, compared
// bitwise, or returns "".
func sampleDiff(got, want []Sample) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d samples, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.TS != w.TS || math.Float64bits(g.Value) != math.Float64bits(w.Value) {
			return fmt.Sprintf("sample %d: got {%d %v (%#016x)}, want {%d %v (%#016x)}",
				i, g.TS, g.Value, math.Float64bits(g.Value), w.TS, w.Value, math.Float64bits(w.Value))
		}
	}
	return ""
}

// wantHeader computes the header fields of samples the slow way.
func wantHeader(samples []Sample) (count int, first, last int64, lo, hi float64) {
	lo, hi = math.NaN(), math.NaN()
	for _, s := range samples {
		v := s.Value
		switch {
		case math.IsNaN(v):
		case math.IsNaN(lo):
			lo, hi = v, v
		default:
			if v < lo || v == 0 && lo == 0 && math.Signbit(v) {
				lo = v
			}
			if v > hi || v == 0 && hi == 0 && !math.Signbit(v) {
				hi = v
			}
		}
	}
	return len(samples), samples[0].TS, samples[len(samples)-1].TS, lo, hi
}

// checkHeader checks h against samples.
func checkHeader(t *testing.T, h BucketHeader, samples []Sample) {
	t.Helper()
	count, first, last, lo, hi := wantHeader(samples)
	if h.Count != count || h.First != first || h.Last != last ||
		math.Float64bits(h.Min) != math.Float64bits(lo) || math.Float64bits(h.Max) != math.Float64bits(hi) {
		t.Errorf("header: got count %d, ts %d..%d, values %v..%v; want %d, %d..%d, %v..%v",
			h.Count, h.First, h.Last, h.Min, h.Max, count, first, last, lo, hi)
	}
}

// roundTrip encodes and decodes samples, checks the result and returns the
// encoding.
func roundTrip(t *testing.T, samples []Sample) []byte {
	t.Helper()
	prefix := []byte("prefix")
	b, err := AppendBucket(prefix, samples)
	if err != nil {
		t.Fatalf("AppendBucket: %v", err)
	}
	if !bytes.Equal(b[:len(prefix)], []byte("prefix")) {
		t.Fatalf("AppendBucket overwrote dst")
	}
	b = b[len(prefix):]
	h, err := ParseBucketHeader(b)
	if err != nil {
		t.Fatalf("ParseBucketHeader: %v", err)
	}
	checkHeader(t, h, samples)
	dst := []Sample{{TS: 7, Value: 7}}
	got, err := DecodeBucket(dst, b)
	if err != nil {
		t.Fatalf("DecodeBucket: %v (kind %v, %d bytes)", err, h.Kind, len(b))
	}
	if got[0] != dst[0] {
		t.Fatalf("DecodeBucket overwrote dst")
	}
	if d := sampleDiff(got[1:], samples); d != "" {
		t.Fatalf("round trip (kind %v): %s", h.Kind, d)
	}
	return b
}

// series returns samples at ts0, ts0+step, … with the given values.
func series(ts0, step int64, values ...float64) []Sample {
	s := make([]Sample, len(values))
	for i, v := range values {
		s[i] = Sample{TS: ts0 + int64(i)*step, Value: v}
	}
	return s
}

func nanWithPayload(p uint64) float64 { return math.Float64frombits(0x7ff0000000000000 | p) }

// sum returns a+b in float64 arithmetic (0.1+0.2 in Go source is the exact
// constant 0.3).
func sum(a, b float64) float64 { return a + b }

func TestBucket_RoundTrip(t *testing.T) {
	const day = int64(1763769600) * 1e9 // 2025-11-22T00:00:00Z
	negZero := math.Copysign(0, -1)
	ramp := make([]Sample, maxBucketSamples)
	for i := range ramp {
		ramp[i] = Sample{TS: day + int64(i)*1e9, Value: float64(i%500) / 10}
	}
	for _, tc := range []struct {
		name    string
		samples []Sample
		kind    BucketKind
	}{
		{"single", series(day, 0, 21.5), BucketDecimal},
		{"single NaN", series(day, 0, nanWithPayload(0xdead)), BucketFloat},
		{"temperatures", series(day, 1e9, 21.53, 21.5, 21.49, 21.6, 22, -3.25), BucketDecimal},
		{"one decimal", series(day, 1e6, 40.1, 40.2, 40.1, 39.9), BucketDecimal},
		{"integers", series(day, 60e9, 100, 100, 100, 99), BucketDecimal},
		{"constant", series(day, 1e9, 3.14159, 3.14159, 3.14159), BucketDecimal},
		{"not quite decimal", series(day, 1e9, sum(0.1, 0.2), 0.3, 0.1), BucketFloat},
		{"17 digits", series(day, 1e9, 0.30000000000000004, 1), BucketFloat},
		{"tiny", series(day, 1e9, 1e-15, 2e-15), BucketDecimal},
		{"NaN payloads", series(day, 1e9, nanWithPayload(1), math.NaN(), nanWithPayload(1<<51|7), -nanWithPayload(3)), BucketFloat},
		{"NaN among decimals", series(day, 1e9, 21.5, math.NaN(), 21.6), BucketFloat},
		{"infinities", series(day, 1e9, math.Inf(1), math.Inf(-1), 0, math.Inf(1)), BucketFloat},
		{"signed zeros", series(day, 1e9, 0, negZero, 0, negZero), BucketFloat},
		{"negative zero alone", series(day, 0, negZero), BucketFloat},
		{"subnormals", series(day, 1e9, 5e-324, -5e-324, math.SmallestNonzeroFloat64*3), BucketFloat},
		{"huge jumps", series(day, 1e9, math.MaxFloat64, -math.MaxFloat64, 1, 1e300, -1e-300), BucketFloat},
		{"huge decimals", series(day, 1e9, 1<<53, -(1 << 53), 0), BucketDecimal},
		{"beyond 2^53", series(day, 1e9, 1<<54+2, 3), BucketFloat},
		{"equal timestamps", series(day, 0, 1, 2, 3, 3, 5), BucketDecimal},
		{"negative timestamps", series(-5e18, 12345, 1, 2, 3), BucketDecimal},
		{"nanosecond timestamps", series(day+1, 1, 1, 2, 3), BucketDecimal},
		{"extreme timestamps", []Sample{{math.MinInt64, 1}, {-1, 2}, {0, 3}, {math.MaxInt64, 4}}, BucketDecimal},
		{"all MinInt64", series(math.MinInt64, 0, 1, 1), BucketDecimal},
		{"all MaxInt64", series(math.MaxInt64, 0, nanWithPayload(9), nanWithPayload(9)), BucketFloat},
		{"zero timestamps", series(0, 0, 1, 2), BucketDecimal},
		{"max count", ramp, BucketDecimal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := roundTrip(t, tc.samples)
			if got := BucketKind(b[0]); got != tc.kind {
				t.Errorf("kind: got %v, want %v", got, tc.kind)
			}
		})
	}
}

func TestBucket_RoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gens := map[string]func() float64{
		"bits":     func() float64 { return math.Float64frombits(rng.Uint64()) },
		"normal":   func() float64 { return rng.NormFloat64() * 1e3 },
		"decimal2": func() float64 { return float64(rng.IntN(20001)-10000) / 100 },
		"decimal9": func() float64 { return float64(rng.Int64N(1e12)) / 1e9 },
		"int":      func() float64 { return float64(rng.Int64N(1<<53) - 1<<52) },
		"pool": func() float64 {
			pool := []float64{0, math.Copysign(0, -1), 1, math.NaN(), nanWithPayload(5), math.Inf(1), 0.1, 1e-310}
			return pool[rng.IntN(len(pool))]
		},
	}
	tss := map[string]func(prev int64) int64{
		"random":   func(int64) int64 { return int64(rng.Uint64()) },
		"ms":       func(p int64) int64 { return p + 1e9 + rng.Int64N(20)*1e6 },
		"equal":    func(p int64) int64 { return p + rng.Int64N(2) },
		"seconds":  func(p int64) int64 { return p + (1+rng.Int64N(600))*1e9 },
		"extremes": func(int64) int64 { return []int64{math.MinInt64, -1, 0, math.MaxInt64}[rng.IntN(4)] },
	}
	for gname, gen := range gens {
		for tname, next := range tss {
			t.Run(gname+"/"+tname, func(t *testing.T) {
				for range 20 {
					s := make([]Sample, 1+rng.IntN(300))
					ts := rng.Int64N(2e18) - 1e18
					for i := range s {
						ts = next(ts)
						s[i] = Sample{TS: ts, Value: gen()}
					}
					sortSamples(s)
					roundTrip(t, s)
				}
			})
		}
	}
}

func TestAppendBucket_Rejects(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		samples []Sample
	}{
		{"empty", nil},
		{"too many", make([]Sample, maxBucketSamples+1)},
		{"unsorted", []Sample{{2, 1}, {1, 1}}},
		{"unsorted extremes", []Sample{{math.MaxInt64, 1}, {math.MinInt64, 1}}},
		{"tie by value bits", []Sample{{1, 2}, {1, 1}}},
		{"tie negative first", []Sample{{1, -1}, {1, 1}}}, // -1 has the sign bit
		{"tie NaN first", []Sample{{1, nan}, {1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("x")
			got, err := AppendBucket(dst, tc.samples)
			if err == nil {
				t.Fatalf("AppendBucket: got nil error")
			}
			if string(got) != "x" {
				t.Errorf("AppendBucket: got dst %q, want it unchanged", got)
			}
		})
	}
}

func TestDecodeBucket_Truncated(t *testing.T) {
	for _, samples := range [][]Sample{
		bucketDataset("temperature", 200),
		bucketDataset("random", 50),
		series(0, 1, 1),
		series(math.MinInt64, 1<<62, math.NaN(), 0, math.Inf(-1), 5),
	} {
		b, err := AppendBucket(nil, samples)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(b) {
			_, err := ParseBucketHeader(b[:n])
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("ParseBucketHeader(%d of %d bytes): got %v, want nil or io.ErrUnexpectedEOF", n, len(b), err)
			}
			got, err := DecodeBucket(nil, b[:n])
			if err != io.ErrUnexpectedEOF || got != nil {
				t.Fatalf("DecodeBucket(%d of %d bytes): got %d samples, %v; want io.ErrUnexpectedEOF", n, len(b), len(got), err)
			}
		}
	}
}

func TestDecodeBucket_Corrupt(t *testing.T) {
	valid, err := AppendBucket(nil, series(1e9, 1e9, 1.5, 2.5, 3))
	if err != nil {
		t.Fatal(err)
	}
	float, err := AppendBucket(nil, series(1e9, 1e9, sum(0.1, 0.2), math.Nextafter(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	fh, err := ParseBucketHeader(float)
	if err != nil || fh.Kind != BucketFloat {
		t.Fatalf("float bucket: kind %v, %v", fh.Kind, err)
	}
	vh, err := ParseBucketHeader(valid)
	if err != nil {
		t.Fatal(err)
	}
	set := func(b []byte, i int, v byte) []byte { b = slices.Clone(b); b[i] = v; return b }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"unknown kind", set(valid, 0, 0x03)},
		{"kind zero", set(valid, 0, 0)},
		{"zero count", set(valid, 1, 0)},
		{"count above max", []byte{1, 0x80, 0x80, 0x04, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"unit too large", set(valid, 2, 19)},
		{"trailing byte", append(slices.Clone(valid), 0)},
		{"float trailing byte", append(slices.Clone(float), 0)},
		{"max not a value", set(float, fh.size-1, float[fh.size-1]^1)},
		{"min not a value", set(float, fh.size-9, float[fh.size-9]^1)},
		{"bad integer code", set(valid, vh.size+1, 0x41)}, // after minDelta 1
		{"varint overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBucket(nil, tc.b)
			if !errors.Is(err, ErrBadBucket) {
				t.Errorf("DecodeBucket(%x): got %v, want an error wrapping ErrBadBucket", tc.b, err)
			}
		})
	}
	// Flipping any bit never panics, and what decodes is sorted.
	for i := range len(valid) * 8 {
		b := slices.Clone(valid)
		b[i/8] ^= 1 << (i % 8)
		got, err := DecodeBucket(nil, b)
		if err == nil && !slices.IsSortedFunc(got, func(a, b Sample) int { return cmpInt(a.TS, b.TS) }) {
			t.Errorf("bit %d flipped: decoded unsorted samples %v", i, got)
		}
	}
}

func TestBucket_NoAllocs(t *testing.T) {
	samples := bucketDataset("temperature", 200)
	buf, err := AppendBucket(nil, samples)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Sample, 0, len(samples))
	if n := testing.AllocsPerRun(50, func() {
		if _, err := AppendBucket(buf[:0], samples); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendBucket: got %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(50, func() {
		if _, err := DecodeBucket(out[:0], buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("DecodeBucket: got %v allocations, want 0", n)
	}
}

// Integers of every length, in Exp-Golomb codes of several orders and in
// fixed widths.
func TestBitWriter_IntCodes(t *testing.T) {
	var vals []uint64
	for i := range 64 {
		vals = append(vals, 1<<i-1, 1<<i, 1<<i+1)
	}
	vals = append(vals, math.MaxUint64, math.MaxUint64-1)
	codes := []intCode{0, 1, 5, 31, 63, 64, fixedWidth | 64}
	for _, c := range codes {
		w := bitWriter{}
		for _, v := range vals {
			w.writeInt(v, c)
		}
		r := bitReader{b: w.finish()}
		for _, want := range vals {
			if got, err := r.readInt(c); err != nil || got != want {
				t.Fatalf("code 0x%02x: got %d, %v; want %d", byte(c), got, err, want)
			}
		}
		if err := r.done(); err != nil {
			t.Errorf("code 0x%02x: %v", byte(c), err)
		}
	}
	for width := range uint(65) {
		w := bitWriter{}
		for _, v := range vals {
			w.writeInt(v, fixedWidth|intCode(width))
		}
		r := bitReader{b: w.finish()}
		for _, v := range vals {
			want := v
			if width < 64 {
				want &= 1<<width - 1
			}
			if got, err := r.readInt(fixedWidth | intCode(width)); err != nil || got != want {
				t.Fatalf("width %d: got %d, %v; want %d", width, got, err, want)
			}
		}
	}
}

// FuzzIntCodes: integers written in any code, between bits written
// raw, read back as written, and the stream ends where it should.
func FuzzIntCodes(f *testing.F) {
	f.Add(byte(0), byte(0x80), []byte("\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Add(byte(64), byte(0xc0), []byte("\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(byte(5), byte(0x83), []byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"))
	f.Fuzz(func(t *testing.T, code, width byte, data []byte) {
		c := intCode(code % 65)
		if width&byte(fixedWidth) != 0 {
			c = fixedWidth | intCode(width%65)
		}
		var vals []uint64
		for len(data) >= 8 {
			vals = append(vals, binary.BigEndian.Uint64(data))
			data = data[8:]
		}
		w := bitWriter{}
		for i, v := range vals {
			w.writeInt(v, c)
			w.writeBits(uint64(i), uint(i%9)) // misalign the next integer
		}
		r := bitReader{b: w.finish()}
		for i, v := range vals {
			want := v
			if c&fixedWidth != 0 && c != fixedWidth|64 {
				want &= 1<<uint(c&^fixedWidth) - 1
			}
			if got, err := r.readInt(c); err != nil || got != want {
				t.Fatalf("integer %d in code 0x%02x: got %d, %v; want %d", i, byte(c), got, err, want)
			}
			if got, err := r.readBits(uint(i % 9)); err != nil || got != uint64(i)&(1<<uint(i%9)-1) {
				t.Fatalf("bits after integer %d: got %d, %v", i, got, err)
			}
		}
		if err := r.done(); err != nil {
			t.Fatalf("code 0x%02x: %v", byte(c), err)
		}
	})
}

func TestBucket_ConstantSeriesTakesNoBitsPerSample(t *testing.T) {
	s := make([]Sample, maxBucketSamples)
	for i := range s {
		s[i] = Sample{TS: 1763769600e9 + int64(i)*10e9, Value: 55.5}
	}
	if b := roundTrip(t, s); len(b) > 32 {
		t.Errorf("got %d bytes for a constant, evenly spaced series, want at most 32", len(b))
	}
}

func TestDecodeBucket_CountBeyondInput(t *testing.T) {
	// A header that claims maxBucketSamples samples of 1 bit or more, then
	// two bytes: DecodeBucket must not make room for them.
	b := []byte{byte(BucketDecimal), 0xff, 0xff, 0x03, 9, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}
	if got, err := DecodeBucket(nil, b); err != io.ErrUnexpectedEOF {
		t.Fatalf("got %d samples, %v; want io.ErrUnexpectedEOF", len(got), err)
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = DecodeBucket(nil, b) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// bucketDatasets names the series of bucketDataset.
var bucketDatasets = []string{"temperature", "humidity", "linkquality", "battery", "counter", "random", "irregular"}

// bucketDataset returns n samples of a named, made-up but realistic series,
// the same on every call (docs/storage.md describes them):
//
//	temperature  1 Hz, ms timestamps with ±5 ms jitter, daily sine + random walk + noise, 2 decimals
//	humidity     every 10 s, whole seconds, 1 decimal
//	linkquality  every 60 s, ms timestamps with 0-200 ms jitter, integer random walk in 0..255
//	battery      every 60 s like linkquality, constant 100
//	counter      every 10 s, whole seconds, integer counter growing by 0-5
//	random       1 Hz like temperature, full-precision random floats
//	irregular    gaps of 1-600 s at ms resolution, 2 decimals
func bucketDataset(name string, n int) []Sample {
	seed := uint64(0)
	for _, c := range name {
		seed = seed*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).UnixNano()
	daily := func(ts int64, mean, amp float64) float64 {
		return mean + amp*math.Sin(2*math.Pi*float64(ts-day)/float64(24*time.Hour))
	}
	round := func(v, p float64) float64 { return math.Round(v*p) / p }
	jitter := func(ms int64) int64 { return ms * int64(time.Millisecond) }
	s := make([]Sample, n)
	walk, ts, count := 0.0, day, 123456.0
	for i := range s {
		var v float64
		switch name {
		case "temperature", "random":
			ts = day + int64(i)*int64(time.Second) + jitter(int64(math.Round(rng.NormFloat64()*5)))
			walk += rng.NormFloat64() * 0.005
			v = round(daily(ts, 21, 3)+walk+rng.NormFloat64()*0.02, 100)
			if name == "random" {
				v = rng.NormFloat64() * 50
			}
		case "humidity":
			ts = day + int64(i)*int64(10*time.Second)
			walk += rng.NormFloat64() * 0.02
			v = round(min(100, max(0, daily(ts, 55, 10)+walk+rng.NormFloat64()*0.1)), 10)
		case "linkquality", "battery":
			ts = day + int64(i)*int64(time.Minute) + jitter(rng.Int64N(200))
			walk = min(255, max(0, walk+math.Round(rng.NormFloat64()*3)))
			v = 120 + walk
			if name == "battery" {
				v = 100
			}
		case "counter":
			ts = day + int64(i)*int64(10*time.Second)
			count += float64(rng.IntN(6))
			v = count
		case "irregular":
			ts += jitter(1000 + rng.Int64N(599_001))
			walk += rng.NormFloat64() * 0.05
			v = round(daily(ts, 21, 3)+walk+rng.NormFloat64()*0.02, 100)
		default:
			panic("unknown dataset " + name)
		}
		s[i] = Sample{TS: ts, Value: v}
	}
	sortSamples(s)
	return s
}

// chunks splits samples into buckets of n.
func chunks(samples []Sample, n int) [][]Sample {
	var out [][]Sample
	for len(samples) > 0 {
		k := min(n, len(samples))
		out = append(out, samples[:k])
		samples = samples[k:]
	}
	return out
}

// fuzzSeries are the series whose encodings seed FuzzDecodeBucket.
func fuzzSeries() [][]Sample {
	return [][]Sample{
		bucketDataset("temperature", 20),
		bucketDataset("random", 5),
		bucketDataset("counter", 3),
		series(0, 0, 1),
		series(-1, 1, math.NaN(), math.Inf(1), math.Copysign(0, -1), sum(0.1, 0.2)),
		{{math.MinInt64, 1}, {math.MaxInt64, 2}},
	}
}

func FuzzDecodeBucket(f *testing.F) {
	for _, s := range fuzzSeries() {
		b, err := AppendBucket(nil, s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeBucket(nil, b)
		// The one allocation of DecodeBucket is bounded by the input's size,
		// but for evenly spaced equal values, which take no bits.
		if c := cap(got); c > 2*maxBucketSamples || c > 2*(8*len(b)+1) && !takesNoBits(got) {
			t.Fatalf("decoding %d bytes allocated room for %d samples", len(b), c)
		}
		if err != nil {
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrBadBucket) {
				t.Fatalf("got error %v, want io.ErrUnexpectedEOF or ErrBadBucket", err)
			}
			if got != nil {
				t.Fatalf("got %d samples and error %v", len(got), err)
			}
			return
		}
		h, err := ParseBucketHeader(b)
		if err != nil {
			t.Fatalf("decodes, but ParseBucketHeader: %v", err)
		}
		checkHeader(t, h, got)
		re, err := AppendBucket(nil, got)
		if err != nil {
			t.Fatalf("decodes, but does not encode: %v", err)
		}
		again, err := DecodeBucket(nil, re)
		if err != nil {
			t.Fatalf("re-encoded bucket: %v", err)
		}
		if d := sampleDiff(again, got); d != "" {
			t.Fatalf("re-encoded bucket: %s", d)
		}
	})
}

// takesNoBits reports whether s is evenly spaced and constant, bitwise.
func takesNoBits(s []Sample) bool {
	for i := 2; i < len(s); i++ {
		if s[i].TS-s[i-1].TS != s[1].TS-s[0].TS || math.Float64bits(s[i].Value) != math.Float64bits(s[0].Value) {
			return false
		}
	}
	return len(s) > 1 && math.Float64bits(s[1].Value) == math.Float64bits(s[0].Value)
}

func FuzzBucketRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x02\x01\x04\x06\x03\x02"))
	f.Add([]byte("\x31\x02\x18\x7c\x2c\x1e\x4a\x00\x00\x00\x00\x86\x21\x10\x00\x87\x21\x10\x00\x85\x21\x10\x00"))
	f.Add([]byte("\x02\x00\xff\xff\xff\xff\xff\xff\xff\xff\x01\x7f\xf8\x00\x00\x00\x00\x00\x01\x01\x02\x05\x02\x09\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if s := fuzzSamples(data); len(s) > 0 {
			roundTrip(t, s)
		}
	})
}

// fuzzSamples makes up to 1000 sorted samples from data: a flags byte
// (bit 0: all values decimal; bits 3-7: timestamp unit 10^(n%19) ns), a
// decimal scale byte, the first timestamp, then per sample a selector byte,
// the value and a timestamp step.
func fuzzSamples(data []byte) []Sample {
	specials := []float64{0, math.Copysign(0, -1), math.NaN(), nanWithPayload(1), -nanWithPayload(1 << 50),
		math.Inf(1), math.Inf(-1), math.MaxFloat64, 5e-324, sum(0.1, 0.2), 1 << 53, 1<<53 + 2}
	c := byteCursor{b: data}
	flags := c.byte()
	unit := int64(math.Pow10(int(flags>>3) % 19))
	scale := math.Pow10(int(c.byte() % (maxScale + 2)))
	ts := int64(c.uint64())
	var s []Sample
	prev := 0.0
	for len(s) < 1000 {
		sel := c.byte()
		v := prev
		switch {
		case flags&1 == 1 || sel%4 == 0:
			v = float64(c.varint()) / scale
		case sel%4 == 1:
			v = math.Float64frombits(c.uint64())
		case sel%4 == 2:
			v = specials[int(sel>>2)%len(specials)]
		}
		ts += c.varint() * unit
		if c.err != nil {
			break
		}
		s = append(s, Sample{TS: ts, Value: v})
		prev = v
	}
	sortSamples(s)
	return s
}

func BenchmarkAppendBucket(b *testing.B) {
	for _, name := range bucketDatasets {
		b.Run(name, func(b *testing.B) {
			buckets := chunks(bucketDataset(name, 200*50), 200)
			size := 0
			var buf []byte
			for _, s := range buckets {
				buf, _ = AppendBucket(buf[:0], s)
				size += len(buf)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				buf, _ = AppendBucket(buf[:0], buckets[i%len(buckets)])
			}
			b.ReportMetric(float64(size)/float64(200*len(buckets)), "B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(200*b.N), "ns/sample")
		})
	}
}

func BenchmarkDecodeBucket(b *testing.B) {
	for _, name := range bucketDatasets {
		b.Run(name, func(b *testing.B) {
			var encoded [][]byte
			size := 0
			for _, s := range chunks(bucketDataset(name, 200*50), 200) {
				e, _ := AppendBucket(nil, s)
				encoded = append(encoded, e)
				size += len(e)
			}
			out := make([]Sample, 0, 200)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := DecodeBucket(out[:0], encoded[i%len(encoded)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size)/float64(200*len(encoded)), "B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(200*b.N), "ns/sample")
		})
	}
}

// The encodings that lost to AppendBucket's in the comparison of
// docs/storage.md ("Choosing the encoding") are in bucket_compare_test.go,
// kept to reproduce it. They share AppendBucket's header and trust their
// input.
