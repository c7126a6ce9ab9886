package aggregate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Encoding of a States by Append: a kind byte, then unsigned varints
// (encoding/binary's Uvarint, minimal: no redundant 0x80 bytes) but for the
// first reading's time, 8 bytes big-endian (two's complement):
//
//	kind(1) n(uvarint)                                      n = 0: empty
//	kind(1) n firstTS(8) firstID span lastID {idGap count dur}×n
//
// n is the number of states, span is Last.TS - First.TS, and each of the n
// entries (in increasing ID order) has its ID as the gap from the entry
// before (ID - previous ID - 1; the first entry's ID itself), its count and
// its time in nanoseconds. Count is the sum of the entries' counts.
//
// The kind byte has its top bit set: a Stats starts with its version byte,
// statsVersion (1), so a record's kind can be told from its first byte
// (IsStates). Versions of either grow from 1 in the low bits.
const statesKind = 0x81

// ErrBadStates is wrapped by the errors DecodeStates returns for an input
// that is not an encoded States.
var ErrBadStates = errors.New("bad states encoding")

// IsStates reports whether b starts as an encoded States does, rather than
// as an encoded Stats: whether its first byte is a States' kind byte.
func IsStates(b []byte) bool { return len(b) > 0 && b[0] == statesKind }

// Append appends the encoding of s to dst and returns the extended slice.
// s must be a States that Add, FromSamples or Merge made or DecodeStates
// returned; Append does not check it. An empty States takes 2 bytes, any
// other 13 to 34 plus 3 to 25 per state: a minute with one reading takes
// 16.
func (s States) Append(dst []byte) []byte {
	dst = append(dst, statesKind)
	dst = binary.AppendUvarint(dst, uint64(len(s.PerState)))
	if len(s.PerState) == 0 {
		return dst
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.First.TS))
	dst = binary.AppendUvarint(dst, uint64(s.First.ID))
	dst = binary.AppendUvarint(dst, span(s.First.TS, s.Last.TS))
	dst = binary.AppendUvarint(dst, uint64(s.Last.ID))
	next := uint32(0) // the least ID the next entry may have
	for _, e := range s.PerState {
		dst = binary.AppendUvarint(dst, uint64(e.ID-next))
		dst = binary.AppendUvarint(dst, e.Count)
		dst = binary.AppendUvarint(dst, e.Dur)
		next = e.ID + 1
	}
	return dst
}

// statesReader reads the fields of an encoded States, keeping the first
// error.
type statesReader struct {
	b   []byte
	err error
}

func (r *statesReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// uvarint reads a minimal uvarint not above max.
func (r *statesReader) uvarint(what string, max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.fail(fmt.Errorf("%w: %s: %w", ErrBadStates, what, io.ErrUnexpectedEOF))
		return 0
	case n < 0:
		r.fail(fmt.Errorf("%w: %s: varint overflows 64 bits", ErrBadStates, what))
		return 0
	case n > 1 && r.b[n-1] == 0:
		r.fail(fmt.Errorf("%w: %s: varint not minimal", ErrBadStates, what))
		return 0
	case v > max:
		r.fail(fmt.Errorf("%w: %s %d above %d", ErrBadStates, what, v, max))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *statesReader) uint64BE(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail(fmt.Errorf("%w: %s: %w", ErrBadStates, what, io.ErrUnexpectedEOF))
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// minEntryLen is the length of the shortest encoded entry: three one-byte
// varints.
const minEntryLen = 3

// DecodeStates decodes a States encoded by Append. b must be exactly one
// encoding, and a consistent one: every error it returns wraps
// ErrBadStates, and also io.ErrUnexpectedEOF for an empty or truncated b.
// It checks that the entries are in increasing ID order, each with a
// count of at least 1; that their times add up to Last.TS - First.TS
// without overflow; that First and Last are at states with a reading and
// are one reading if Count is 1; and that no varint is longer than it
// needs to be, so that Append gives back b. Its allocation is bounded by
// len(b). It never retains b.
func DecodeStates(b []byte) (States, error) {
	if len(b) == 0 {
		return States{}, fmt.Errorf("%w: %w", ErrBadStates, io.ErrUnexpectedEOF)
	}
	if b[0] != statesKind {
		return States{}, fmt.Errorf("%w: kind %#x, want %#x", ErrBadStates, b[0], statesKind)
	}
	r := statesReader{b: b[1:]}
	n := r.uvarint("state count", math.MaxUint32+1)
	if r.err == nil && n == 0 {
		if len(r.b) > 0 {
			return States{}, fmt.Errorf("%w: %d bytes after an empty record", ErrBadStates, len(r.b))
		}
		return States{}, nil
	}
	var s States
	s.First.TS = int64(r.uint64BE("first time"))
	s.First.ID = uint32(r.uvarint("first id", math.MaxUint32))
	// Last.TS = First.TS + span must not pass math.MaxInt64: in uint64
	// arithmetic modulo 2⁶⁴, MaxInt64 - First.TS is exact.
	spanNs := r.uvarint("span", uint64(math.MaxInt64)-uint64(s.First.TS))
	s.Last.TS = int64(uint64(s.First.TS) + spanNs)
	s.Last.ID = uint32(r.uvarint("last id", math.MaxUint32))
	if r.err == nil && n > uint64(len(r.b)/minEntryLen) {
		r.fail(fmt.Errorf("%w: %d states in %d bytes: %w", ErrBadStates, n, len(r.b), io.ErrUnexpectedEOF))
	}
	if r.err != nil {
		return States{}, r.err
	}
	s.PerState = make([]StateStats, 0, n)
	var durs uint64
	next := uint64(0) // the least ID the next entry may have
	for range n {
		if next > math.MaxUint32 {
			return States{}, fmt.Errorf("%w: a state after state %d", ErrBadStates, uint32(math.MaxUint32))
		}
		var e StateStats
		e.ID = uint32(next + r.uvarint("id gap", math.MaxUint32-next))
		e.Count = r.uvarint("count", math.MaxUint64-s.Count)
		e.Dur = r.uvarint("time", spanNs-durs)
		if r.err != nil {
			return States{}, r.err
		}
		if e.Count == 0 {
			return States{}, fmt.Errorf("%w: state %d with no reading", ErrBadStates, e.ID)
		}
		s.Count += e.Count
		durs += e.Dur
		s.PerState = append(s.PerState, e)
		next = uint64(e.ID) + 1
	}
	if err := s.check(durs, spanNs); err != nil {
		return States{}, err
	}
	if len(r.b) > 0 {
		return States{}, fmt.Errorf("%w: %d bytes after the record", ErrBadStates, len(r.b))
	}
	return s, nil
}

// check checks a decoded States against its times' sum durs and span.
func (s States) check(durs, spanNs uint64) error {
	if durs != spanNs {
		return fmt.Errorf("%w: times add up to %d ns, want %d", ErrBadStates, durs, spanNs)
	}
	has := func(id uint32) bool {
		for _, e := range s.PerState {
			if e.ID == id {
				return true
			}
		}
		return false
	}
	if !has(s.First.ID) || !has(s.Last.ID) {
		return fmt.Errorf("%w: first state %d or last state %d has no reading", ErrBadStates, s.First.ID, s.Last.ID)
	}
	if s.Count == 1 && s.First != s.Last {
		return fmt.Errorf("%w: one reading, but first %+v and last %+v", ErrBadStates, s.First, s.Last)
	}
	if s.Last.Compare(s.First) < 0 {
		return fmt.Errorf("%w: last %+v before first %+v", ErrBadStates, s.Last, s.First)
	}
	return nil
}
