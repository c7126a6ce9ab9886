package encoding

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

// Byte and bit readers and writers of the bucket encoding.

// byteCursor reads the byte-aligned fields of a bucket. Its first error
// sticks: later reads return zero.
type byteCursor struct {
	b   []byte
	err error
}

func (c *byteCursor) byte() byte {
	if c.err == nil && len(c.b) < 1 {
		c.err = io.ErrUnexpectedEOF
	}
	if c.err != nil {
		return 0
	}
	v := c.b[0]
	c.b = c.b[1:]
	return v
}

func (c *byteCursor) uint64() uint64 {
	if c.err == nil && len(c.b) < 8 {
		c.err = io.ErrUnexpectedEOF
	}
	if c.err != nil {
		return 0
	}
	v := binary.BigEndian.Uint64(c.b)
	c.b = c.b[8:]
	return v
}

func (c *byteCursor) uvarint() uint64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Uvarint(c.b)
	if n <= 0 {
		c.err = io.ErrUnexpectedEOF
		if n < 0 {
			c.err = fmt.Errorf("%w: varint overflows 64 bits", ErrBadBucket)
		}
		return 0
	}
	c.b = c.b[n:]
	return v
}

// varint reads what binary.AppendVarint writes: a zigzagged uvarint.
func (c *byteCursor) varint() int64 { return unzigzag(c.uvarint()) }

// bitWriter appends bits, most significant first, to b.
type bitWriter struct {
	b   []byte
	acc uint64 // pending bits, left-aligned
	n   uint   // number of pending bits, < 64
}

// writeBits writes the low n bits of v, n ≤ 64.
func (w *bitWriter) writeBits(v uint64, n uint) {
	if n < 64 {
		v &= 1<<n - 1
	}
	free := 64 - w.n
	if n < free {
		w.acc |= v << (free - n)
		w.n += n
		return
	}
	w.acc |= v >> (n - free)
	w.b = binary.BigEndian.AppendUint64(w.b, w.acc)
	w.n = n - free
	w.acc = v << (64 - w.n) // 0 if w.n == 0
}

// writeInt writes v with code c.
func (w *bitWriter) writeInt(v uint64, c intCode) {
	if c&fixedWidth != 0 {
		w.writeBits(v, uint(c&^fixedWidth))
		return
	}
	w.writeEG(v, uint(c))
}

// writeEG writes v with the Exp-Golomb code of order k: with q = v>>k + 1
// of l bits, l-1 zeros, then q's l bits, then v's low k bits. Small values
// take k+1 bits; a value of 64 bits at most 129+k.
func (w *bitWriter) writeEG(v uint64, k uint) {
	q := v>>k + 1
	if c := 2*uint(bits.Len64(q)) - 1 + k; c <= 64 && q != 0 {
		w.writeBits(q<<k|v&(1<<k-1), c)
		return
	}
	w.writeLongEG(v, k)
}

func (w *bitWriter) writeLongEG(v uint64, k uint) {
	q := v>>k + 1
	l := uint(bits.Len64(q))
	if q == 0 { // v>>k + 1 == 2^64
		l = 65
	}
	w.writeBits(0, l-1)
	w.writeBits(1, 1)
	w.writeBits(q, l-1)
	w.writeBits(v, k)
}

// finish writes the pending bits, padded with zeros to a whole byte, and
// returns the buffer.
func (w *bitWriter) finish() []byte {
	for i := uint(0); i < w.n; i += 8 {
		w.b = append(w.b, byte(w.acc>>(56-i)))
	}
	w.acc, w.n = 0, 0
	return w.b
}

// bitReader reads bits written by bitWriter.
type bitReader struct {
	b   []byte // bytes not yet loaded into acc
	acc uint64 // n bits, left-aligned; the bits below them may hold the next bits of b
	n   uint
}

// refill loads whole bytes of b into acc until it holds more than 56 bits
// or b is empty.
func (r *bitReader) refill() {
	if len(r.b) >= 8 {
		r.acc |= binary.BigEndian.Uint64(r.b) >> r.n
		c := (63 - r.n) >> 3
		r.b = r.b[c:]
		r.n += c << 3
		return
	}
	for r.n <= 56 && len(r.b) > 0 {
		r.acc |= uint64(r.b[0]) << (56 - r.n)
		r.b = r.b[1:]
		r.n += 8
	}
}

// readBits reads n ≤ 64 bits.
func (r *bitReader) readBits(n uint) (uint64, error) {
	if n > 56 {
		hi, err := r.readBits(n - 32)
		if err != nil {
			return 0, err
		}
		lo, err := r.readBits(32)
		return hi<<32 | lo, err
	}
	if r.n < n {
		r.refill()
		if r.n < n {
			return 0, io.ErrUnexpectedEOF
		}
	}
	v := r.acc >> (64 - n) // 0 if n == 0
	r.acc <<= n
	r.n -= n
	return v, nil
}

// readInt reads a value written by writeInt with code c.
func (r *bitReader) readInt(c intCode) (uint64, error) {
	if c&fixedWidth != 0 {
		return r.readBits(uint(c &^ fixedWidth))
	}
	return r.readEG(uint(c))
}

// readEG reads a value written by writeEG with order k ≤ 64.
func (r *bitReader) readEG(k uint) (uint64, error) {
	if r.n <= 56 {
		r.refill()
	}
	z := uint(bits.LeadingZeros64(r.acc))
	if c := 2*z + 1 + k; c <= r.n {
		v := r.acc >> (64 - c)
		r.acc <<= c
		r.n -= c
		return (v>>k-1)<<k | v&(1<<k-1), nil
	}
	// The code does not fit the loaded bits: count zeros across refills.
	z = 0
	for {
		if r.n == 0 {
			if r.refill(); r.n == 0 {
				return 0, io.ErrUnexpectedEOF
			}
		}
		lz := min(uint(bits.LeadingZeros64(r.acc)), r.n)
		r.acc <<= lz
		r.n -= lz
		if z += lz; z > 64 {
			return 0, fmt.Errorf("%w: Exp-Golomb code longer than 64 bits", ErrBadBucket)
		}
		if r.n > 0 {
			break
		}
	}
	r.acc <<= 1 // the 1 that ends the zeros
	r.n--
	low, err := r.readBits(z)
	if err != nil {
		return 0, err
	}
	if z == 64 && low != 0 {
		return 0, fmt.Errorf("%w: Exp-Golomb code longer than 64 bits", ErrBadBucket)
	}
	v := (1<<z | low) - 1 // 1<<64 == 0
	if k == 0 {
		return v, nil
	}
	if v>>(64-k) != 0 {
		return 0, fmt.Errorf("%w: Exp-Golomb code longer than 64 bits", ErrBadBucket)
	}
	rest, err := r.readBits(k)
	return v<<k | rest, err
}

// done returns an error unless every bit was read but for the zero padding
// of the last byte.
func (r *bitReader) done() error {
	if len(r.b) > 0 || r.n >= 8 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadBucket, len(r.b)+int(r.n/8))
	}
	if r.acc != 0 {
		return fmt.Errorf("%w: padding bits are not zero", ErrBadBucket)
	}
	return nil
}
