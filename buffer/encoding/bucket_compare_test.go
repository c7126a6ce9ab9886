package encoding

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// The encodings measured against the chosen one (docs/storage.md).

// bucketCodec is one encoding compared by BenchmarkBucketEncodings.
type bucketCodec struct {
	name   string
	encode func(dst []byte, s []Sample) []byte
	decode func(dst []Sample, b []byte) ([]Sample, error)
}

func bucketCodecs(b *testing.B) []bucketCodec {
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	zdec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { zenc.Close(); zdec.Close() })
	var scratch, packed []byte
	compressed := func(name string, c bucketCodec, compress func(dst, src []byte) []byte, decompress func(dst, src []byte) ([]byte, error)) bucketCodec {
		return bucketCodec{
			name: c.name + "+" + name,
			encode: func(dst []byte, s []Sample) []byte {
				scratch = c.encode(scratch[:0], s)
				return compress(dst, scratch)
			},
			decode: func(dst []Sample, b []byte) ([]Sample, error) {
				var err error
				if scratch, err = decompress(scratch[:0], b); err != nil {
					return dst, err
				}
				return c.decode(dst, scratch)
			},
		}
	}
	zstdOf := func(c bucketCodec) bucketCodec {
		return compressed("zstd", c, func(dst, src []byte) []byte { return zenc.EncodeAll(src, dst) }, func(dst, src []byte) ([]byte, error) { return zdec.DecodeAll(src, dst) })
	}
	snappyOf := func(c bucketCodec) bucketCodec {
		return compressed("snappy", c, func(dst, src []byte) []byte {
			packed = snappy.Encode(packed[:cap(packed)], src)
			return append(dst, packed...)
		}, func(dst, src []byte) ([]byte, error) { return snappy.Decode(dst[:cap(dst)], src) })
	}
	raw := bucketCodec{"raw", appendRaw, decodeRaw}
	gorilla := bucketCodec{"gorilla", func(dst []byte, s []Sample) []byte { return appendGorilla(dst, s, true) }, decodeGorilla}
	gorillaNS := bucketCodec{"gorilla-ns", func(dst []byte, s []Sample) []byte { return appendGorilla(dst, s, false) }, decodeGorilla}
	varints := bucketCodec{"decimal-varint", appendVarints, decodeVarints}
	chosen := bucketCodec{"decimal-packed", func(dst []byte, s []Sample) []byte {
		dst, err := AppendBucket(dst, s)
		if err != nil {
			panic(err)
		}
		return dst
	}, DecodeBucket}
	return []bucketCodec{raw, gorillaNS, gorilla, snappyOf(gorilla), varints, zstdOf(varints), chosen, snappyOf(chosen), zstdOf(chosen)}
}

// BenchmarkBucketEncodings compares encodings of buckets of 50, 200 and
// 1000 samples of each dataset. Its B/sample, ns/sample and the command to
// run it are in docs/storage.md.
func BenchmarkBucketEncodings(b *testing.B) {
	for _, c := range bucketCodecs(b) {
		for _, name := range bucketDatasets {
			for _, n := range []int{50, 200, 1000} {
				buckets := chunks(bucketDataset(name, 20000), n)
				var encoded [][]byte
				size := 0
				for _, s := range buckets {
					e := c.encode(nil, s)
					encoded = append(encoded, e)
					size += len(e)
					if got, err := c.decode(nil, e); err != nil || sampleDiff(got, s) != "" {
						b.Fatalf("%s: %s: round trip: %v %s", c.name, name, err, sampleDiff(got, s))
					}
				}
				perSample := float64(size) / 20000
				var buf []byte
				b.Run(fmt.Sprintf("%s/%s/n=%d/encode", c.name, name, n), func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						buf = c.encode(buf[:0], buckets[i%len(buckets)])
					}
					b.ReportMetric(perSample, "B/sample")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/sample")
				})
				out := make([]Sample, 0, n)
				b.Run(fmt.Sprintf("%s/%s/n=%d/decode", c.name, name, n), func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						if _, err := c.decode(out[:0], encoded[i%len(encoded)]); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(perSample, "B/sample")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/sample")
				})
			}
		}
	}
}

func appendRaw(dst []byte, s []Sample) []byte {
	for _, x := range s {
		dst = binary.BigEndian.AppendUint64(dst, uint64(x.TS))
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(x.Value))
	}
	return dst
}

func decodeRaw(dst []Sample, b []byte) ([]Sample, error) {
	for ; len(b) >= 16; b = b[16:] {
		dst = append(dst, Sample{int64(binary.BigEndian.Uint64(b)), math.Float64frombits(binary.BigEndian.Uint64(b[8:]))})
	}
	return dst, nil
}

// appendGorilla encodes s as Facebook's Gorilla does, with 64-bit room:
// delta-of-delta timestamps in the buckets '0', '10'+7, '110'+9, '1110'+12
// and '1111'+64 bits (zigzagged), in the detected unit or in ns, then
// writeXOR's values.
func appendGorilla(dst []byte, s []Sample, detectUnit bool) []byte {
	h, _ := summarize(s)
	h.Kind = BucketFloat
	if !detectUnit {
		h.unit, h.firstU = 1, h.First
	}
	w := bitWriter{b: appendBucketHeader(dst, h)}
	writeDodBuckets(&w, s, h.unit)
	writeXOR(&w, s)
	return w.finish()
}

// writeDodBuckets writes the timestamps of s, less the first, as Gorilla
// does.
func writeDodBuckets(w *bitWriter, s []Sample, unit int64) {
	var prev uint64
	for i := 1; i < len(s); i++ {
		d := inUnits(uint64(s[i].TS)-uint64(s[i-1].TS), unit)
		z := zigzag(int64(d - prev))
		prev = d
		switch {
		case z == 0:
			w.writeBits(0, 1)
		case z < 1<<7:
			w.writeBits(0b10<<7|z, 9)
		case z < 1<<9:
			w.writeBits(0b110<<9|z, 12)
		case z < 1<<12:
			w.writeBits(0b1110<<12|z, 16)
		default:
			w.writeBits(0b1111, 4)
			w.writeBits(z, 64)
		}
	}
}

func decodeGorilla(dst []Sample, b []byte) ([]Sample, error) {
	h, err := ParseBucketHeader(b)
	if err != nil {
		return dst, err
	}
	base := len(dst)
	dst = slices.Grow(dst, h.Count)[:base+h.Count]
	out := dst[base:]
	r := bitReader{b: b[h.size:]}
	t, d := uint64(h.firstU), uint64(0)
	out[0].TS = h.First
	for i := 1; i < len(out); i++ {
		ones := 0
		for ; ones < 4; ones++ {
			if bit, err := r.readBits(1); err != nil || bit == 0 {
				break
			}
		}
		z, err := r.readBits([5]uint{0, 7, 9, 12, 64}[ones])
		if err != nil {
			return dst[:base], err
		}
		d += uint64(unzigzag(z))
		t += d
		out[i].TS = int64(t) * h.unit
	}
	return dst, readXOR(&r, out, h)
}

// appendVarints encodes s as VictoriaMetrics does, but losslessly:
// delta-of-delta timestamps in the detected unit and, for decimal buckets,
// the first scaled value and the deltas, all as zigzag varints; other
// buckets get writeXOR's values.
func appendVarints(dst []byte, s []Sample) []byte {
	h, _ := summarize(s)
	dst = appendBucketHeader(dst, h)
	dst = appendDodVarints(dst, s, h.unit)
	if h.Kind == BucketFloat {
		w := bitWriter{b: dst}
		writeXOR(&w, s)
		return w.finish()
	}
	p, m := math.Pow10(h.scale), int64(0)
	for _, x := range s {
		v := scaledOf(x.Value, p)
		dst = binary.AppendVarint(dst, v-m)
		m = v
	}
	return dst
}

// appendDodVarints appends the timestamps of s, less the first, as zigzag
// varints of their delta of delta.
func appendDodVarints(dst []byte, s []Sample, unit int64) []byte {
	var prev uint64
	for i := 1; i < len(s); i++ {
		d := inUnits(uint64(s[i].TS)-uint64(s[i-1].TS), unit)
		dst = binary.AppendVarint(dst, int64(d-prev))
		prev = d
	}
	return dst
}

func decodeVarints(dst []Sample, b []byte) ([]Sample, error) {
	h, err := ParseBucketHeader(b)
	if err != nil {
		return dst, err
	}
	base := len(dst)
	dst = slices.Grow(dst, h.Count)[:base+h.Count]
	out := dst[base:]
	c := byteCursor{b: b[h.size:]}
	t, d := uint64(h.firstU), uint64(0)
	out[0].TS = h.First
	for i := 1; i < len(out); i++ {
		d += uint64(c.varint())
		t += d
		out[i].TS = int64(t) * h.unit
	}
	if h.Kind == BucketFloat {
		r := bitReader{b: c.b}
		return dst, readXOR(&r, out, h)
	}
	p, m := math.Pow10(h.scale), int64(0)
	for i := range out {
		m += c.varint()
		out[i].Value = float64(m) / p
	}
	return dst, c.err
}

// BenchmarkBucketTimestampCodes compares ways to write the timestamps of
// buckets of 200 samples, all in the detected unit, by the bits per sample
// of the timestamp stream alone (with its parameters, without the header).
func BenchmarkBucketTimestampCodes(b *testing.B) {
	dod := func(s []Sample, unit int64, i int) uint64 {
		d := inUnits(uint64(s[i].TS)-uint64(s[i-1].TS), unit)
		if i == 1 {
			return zigzag(int64(d))
		}
		return zigzag(int64(d - inUnits(uint64(s[i-1].TS)-uint64(s[i-2].TS), unit)))
	}
	codings := []struct {
		name  string
		write func(w *bitWriter, s []Sample, unit int64)
	}{
		{"dod-buckets", writeDodBuckets},
		{"dod-varint", func(w *bitWriter, s []Sample, unit int64) { w.b = appendDodVarints(w.b, s, unit) }},
		{"dod-packed", func(w *bitWriter, s []Sample, unit int64) {
			var hist [65]int
			for i := 1; i < len(s); i++ {
				hist[bits.Len64(dod(s, unit, i))]++
			}
			c := chooseCode(&hist, len(s)-1)
			w.b = append(w.b, byte(c))
			for i := 1; i < len(s); i++ {
				w.writeInt(dod(s, unit, i), c)
			}
		}},
		{"delta-packed", func(w *bitWriter, s []Sample, unit int64) { // AppendBucket's
			minDelta, c := timestampCode(s, unit)
			w.b = append(binary.AppendUvarint(w.b, minDelta), byte(c))
			for i := 1; i < len(s); i++ {
				w.writeInt(inUnits(uint64(s[i].TS)-uint64(s[i-1].TS), unit)-minDelta, c)
			}
		}},
	}
	for _, c := range codings {
		for _, name := range bucketDatasets {
			buckets := chunks(bucketDataset(name, 20000), 200)
			b.Run(c.name+"/"+name, func(b *testing.B) {
				var buf []byte
				size := 0
				for i := 0; b.Loop(); i++ {
					s := buckets[i%len(buckets)]
					w := bitWriter{b: buf[:0]}
					c.write(&w, s, timestampUnit(s))
					buf = w.finish()
					if i < len(buckets) {
						size += len(buf)
					}
				}
				if b.N >= len(buckets) {
					b.ReportMetric(8*float64(size)/20000, "ts-bits/sample")
				}
			})
		}
	}
}
