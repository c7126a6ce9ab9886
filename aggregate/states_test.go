package aggregate

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
	"time"
)

const sec = int64(time.Second)

func TestStates_Add(t *testing.T) {
	// off at 10 s, heat and cool both at 25 s (heat lasts 0 ns: cool has
	// the higher id), off again at 40 s.
	const off, heat, cool = 0, 1, 2
	var s States
	for _, r := range []Sample{{10 * sec, off}, {25 * sec, heat}, {25 * sec, cool}, {40 * sec, off}} {
		if !s.Add(r) {
			t.Fatalf("Add(%+v) in time order: got false", r)
		}
	}
	want := States{Count: 4, First: Sample{10 * sec, off}, Last: Sample{40 * sec, off}, PerState: []StateStats{
		{ID: off, Count: 2, Dur: uint64(15 * sec)},
		{ID: heat, Count: 1, Dur: 0},
		{ID: cool, Count: 1, Dur: uint64(15 * sec)},
	}}
	if !equalStates(s, want) {
		t.Fatalf("got %+v, want %+v", s, want)
	}

	for _, tc := range []struct {
		name string
		r    Sample
		ok   bool
		want States
	}{
		{"before the first", Sample{5 * sec, heat}, true, States{Count: 5, First: Sample{5 * sec, heat}, Last: want.Last,
			PerState: []StateStats{{off, 2, uint64(15 * sec)}, {heat, 2, uint64(5 * sec)}, {cool, 1, uint64(15 * sec)}}}},
		{"after the last", Sample{45 * sec, 7}, true, States{Count: 5, First: want.First, Last: Sample{45 * sec, 7},
			PerState: []StateStats{{off, 2, uint64(20 * sec)}, {heat, 1, 0}, {cool, 1, uint64(15 * sec)}, {7, 1, 0}}}},
		{"equal to the last", Sample{40 * sec, off}, true, States{Count: 5, First: want.First, Last: want.Last,
			PerState: []StateStats{{off, 3, uint64(15 * sec)}, {heat, 1, 0}, {cool, 1, uint64(15 * sec)}}}},
		{"at the first's time, a lower id", Sample{10 * sec, off}, true, States{Count: 5, First: want.First, Last: want.Last,
			PerState: []StateStats{{off, 3, uint64(15 * sec)}, {heat, 1, 0}, {cool, 1, uint64(15 * sec)}}}},
		{"between", Sample{30 * sec, heat}, false, want},
		{"at a middle time, a lower id", Sample{25 * sec, off}, false, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Clone()
			if ok := got.Add(tc.r); ok != tc.ok {
				t.Fatalf("Add(%+v): got %v, want %v", tc.r, ok, tc.ok)
			}
			if !equalStates(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !equalStates(s, want) {
				t.Errorf("Add changed the States cloned from: %+v", s)
			}
		})
	}

	// The Last above is off, id 0: a record whose Last has a higher id.
	t.Run("at the last's time, a lower id", func(t *testing.T) {
		got := FromSamples([]Sample{{10 * sec, off}, {20 * sec, cool}})
		before := got.Clone()
		if got.Add(Sample{20 * sec, heat}) {
			t.Fatalf("Add before the last at its time: got true, want false")
		}
		if !equalStates(got, before) {
			t.Errorf("got %+v, want it unchanged", got)
		}
	})
}

func TestFromSamples(t *testing.T) {
	samples := []Sample{{40 * sec, 0}, {25 * sec, 2}, {10 * sec, 0}, {25 * sec, 1}}
	got := FromSamples(samples)
	want := States{Count: 4, First: Sample{10 * sec, 0}, Last: Sample{40 * sec, 0}, PerState: []StateStats{
		{0, 2, uint64(15 * sec)}, {1, 1, 0}, {2, 1, uint64(15 * sec)},
	}}
	if !equalStates(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !slices.IsSortedFunc(samples, Sample.Compare) {
		t.Errorf("samples not sorted in place: %+v", samples)
	}
	if got := FromSamples(nil); !equalStates(got, States{}) || !got.IsEmpty() {
		t.Errorf("FromSamples(nil): got %+v, want the empty States", got)
	}
}

func TestStates_Merge(t *testing.T) {
	minute0 := FromSamples([]Sample{{10 * sec, 0}, {50 * sec, 1}})
	minute1 := FromSamples([]Sample{{70 * sec, 0}})
	want := States{Count: 3, First: Sample{10 * sec, 0}, Last: Sample{70 * sec, 0}, PerState: []StateStats{
		{0, 2, uint64(40 * sec)}, {1, 1, uint64(20 * sec)}, // 1 lasts from 50 s to the next minute's first reading
	}}

	var got States
	for _, s := range []States{{}, minute0, {}, minute1, {}} {
		if err := got.Merge(s); err != nil {
			t.Fatalf("Merge(%+v): %v", s, err)
		}
	}
	if !equalStates(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	got.PerState[0].Count = 99
	if minute0.PerState[0].Count != 1 {
		t.Errorf("Merge into an empty States shares memory with what it merged")
	}

	before := minute1.Clone()
	if err := minute1.Merge(minute0); !errors.Is(err, ErrStatesOrder) {
		t.Errorf("Merge of an earlier record: got %v, want ErrStatesOrder", err)
	}
	if !equalStates(minute1, before) {
		t.Errorf("a failed Merge changed the States: got %+v, want %+v", minute1, before)
	}
}

func TestStates_TimeIn(t *testing.T) {
	// Readings at 10 s (state 0) and 40 s (state 1) of the range [0, 60 s).
	s := FromSamples([]Sample{{10 * sec, 0}, {40 * sec, 1}})
	d := func(n int64) uint64 { return uint64(n * sec) }
	for _, tc := range []struct {
		name string
		s    States
		q    StateQuery
		want TimeInState
	}{
		{"no reading before", s, StateQuery{To: 60 * sec, Now: 90 * sec},
			TimeInState{Count: 2, Unknown: d(10), PerState: []StateStats{{0, 1, d(30)}, {1, 1, d(20)}}}},
		{"another state before", s, StateQuery{To: 60 * sec, Now: 90 * sec, Before: Prior{ID: 2, Known: true}},
			TimeInState{Count: 2, PerState: []StateStats{{0, 1, d(30)}, {1, 1, d(20)}, {2, 0, d(10)}}}},
		{"the last state before", s, StateQuery{To: 60 * sec, Now: 90 * sec, Before: Prior{ID: 1, Known: true}},
			TimeInState{Count: 2, PerState: []StateStats{{0, 1, d(30)}, {1, 1, d(30)}}}},
		{"now within the range", s, StateQuery{To: 60 * sec, Now: 50 * sec},
			TimeInState{Count: 2, Unknown: d(10), PerState: []StateStats{{0, 1, d(30)}, {1, 1, d(10)}}}},
		{"now before the last reading", s, StateQuery{To: 60 * sec, Now: 30 * sec},
			TimeInState{Count: 2, Unknown: d(10), PerState: []StateStats{{0, 1, d(30)}, {1, 1, 0}}}},
		{"now before the last reading, a reading after", s, StateQuery{To: 60 * sec, Now: 30 * sec, ReadingAfter: true},
			TimeInState{Count: 2, Unknown: d(10), PerState: []StateStats{{0, 1, d(30)}, {1, 1, d(20)}}}},
		{"empty, a state before", States{}, StateQuery{To: 60 * sec, Now: 30 * sec, Before: Prior{ID: 3, Known: true}},
			TimeInState{PerState: []StateStats{{3, 0, d(30)}}}},
		{"empty, no state before", States{}, StateQuery{To: 60 * sec, Now: 90 * sec},
			TimeInState{Unknown: d(60)}},
		{"empty, now before the range", States{}, StateQuery{From: 10 * sec, To: 60 * sec, Now: 0, Before: Prior{ID: 3, Known: true}},
			TimeInState{}},
		{"empty range", States{}, StateQuery{From: 10 * sec, To: 10 * sec, Now: 90 * sec}, TimeInState{}},
		{"whole int64 range", FromSamples([]Sample{{0, 4}}), StateQuery{From: math.MinInt64, To: math.MaxInt64, Now: math.MaxInt64},
			TimeInState{Count: 1, Unknown: 1 << 63, PerState: []StateStats{{4, 1, math.MaxInt64}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.TimeIn(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if !equalTimeIn(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if len(s.PerState) != 2 || s.PerState[0].Dur != d(30) {
		t.Errorf("TimeIn changed the States: %+v", s)
	}

	for _, q := range []StateQuery{
		{From: 20 * sec, To: 60 * sec}, // first reading before From
		{From: 0, To: 40 * sec},        // last reading at To
		{From: 60 * sec, To: 0},        // readings in an empty range
	} {
		if _, err := s.TimeIn(q); !errors.Is(err, ErrStatesOrder) {
			t.Errorf("TimeIn(%+v): got %v, want ErrStatesOrder", q, err)
		}
	}
}

func TestStates_Carry(t *testing.T) {
	in := Prior{ID: 5, Known: true}
	if got := (States{}).Carry(in); got != in {
		t.Errorf("empty: got %+v, want %+v", got, in)
	}
	if got, want := FromSamples([]Sample{{1, 2}, {3, 1}}).Carry(in), (Prior{ID: 1, Known: true}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestStates_AppendDecode(t *testing.T) {
	many := FromSamples(nil)
	for i := range 300 {
		many.Add(Sample{int64(i) * sec, uint32(i*7) % 257})
	}
	for _, s := range []States{
		{},
		FromSamples([]Sample{{0, 0}}),
		FromSamples([]Sample{{10 * sec, 0}, {25 * sec, 2}, {25 * sec, 1}, {40 * sec, 0}}),
		FromSamples([]Sample{{math.MinInt64, math.MaxUint32}, {math.MaxInt64, 0}}),
		FromSamples([]Sample{{-5, 3}, {-5, 3}, {-5, 3}}),
		{Count: math.MaxUint64, First: Sample{1, 0}, Last: Sample{1, 0}, PerState: []StateStats{{0, math.MaxUint64, 0}}},
		many,
	} {
		prefix := []byte("key:")
		b := s.Append(prefix)
		if !bytes.Equal(b[:len(prefix)], []byte("key:")) {
			t.Fatalf("Append changed dst: got %q", b[:len(prefix)])
		}
		if !IsStates(b[len(prefix):]) {
			t.Errorf("IsStates(Append(%+v)): got false", s)
		}
		got, err := DecodeStates(b[len(prefix):])
		if err != nil {
			t.Fatalf("DecodeStates(Append(%+v)): %v", s, err)
		}
		if !equalStates(got, s) {
			t.Errorf("got %+v, want %+v", got, s)
		}
	}
}

func TestStates_AppendLayout(t *testing.T) {
	got := hex.EncodeToString(FromSamples([]Sample{{1000, 0}, {1300, 2}}).Append(nil))
	want := "81" + // kind
		"02" + // 2 states
		"00000000000003e8" + // first time 1000
		"00" + // first id 0
		"ac02" + // span 300 ns
		"02" + // last id 2
		"00" + "01" + "ac02" + // state 0: 1 reading, 300 ns
		"01" + "01" + "00" // state 2 (a gap of 1 after 0): 1 reading, 0 ns
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := hex.EncodeToString((States{}).Append(nil)), "8100"; got != want {
		t.Errorf("empty: got %s, want %s", got, want)
	}
}

func TestIsStates(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"states", FromSamples([]Sample{{1, 1}}).Append(nil), true},
		{"empty states", (States{}).Append(nil), true},
		{"stats", statsOf(1).Append(nil), false},
		{"empty stats", (Stats{}).Append(nil), false},
		{"nothing", nil, false},
	} {
		if got := IsStates(tc.b); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := DecodeStates(statsOf(1).Append(nil)); !errors.Is(err, ErrBadStates) {
		t.Errorf("DecodeStates of a Stats: got %v, want ErrBadStates", err)
	}
	if _, err := Decode(FromSamples([]Sample{{1, 1}}).Append(nil)); !errors.Is(err, ErrBadStats) {
		t.Errorf("Decode of a States: got %v, want ErrBadStats", err)
	}
}

// encodeStates writes an encoding field by field, consistent or not:
// n, the first reading, the span, the last id, then the entries' varints.
func encodeStates(n uint64, firstTS int64, firstID, spanNs, lastID uint64, entries ...uint64) []byte {
	b := binary.AppendUvarint([]byte{statesKind}, n)
	b = binary.BigEndian.AppendUint64(b, uint64(firstTS))
	b = binary.AppendUvarint(b, firstID)
	b = binary.AppendUvarint(b, spanNs)
	b = binary.AppendUvarint(b, lastID)
	for _, v := range entries {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func TestDecodeStates_Bad(t *testing.T) {
	valid := FromSamples([]Sample{{1000, 0}, {1300, 2}}).Append(nil)
	for _, tc := range []struct {
		name string
		b    []byte
		eof  bool // whether the error wraps io.ErrUnexpectedEOF too
	}{
		{"nil", nil, true},
		{"kind only", []byte{statesKind}, true},
		{"a Stats", statsOf(1, 2).Append(nil), false},
		{"kind 0x80", append([]byte{0x80}, valid[1:]...), false},
		{"byte after an empty record", []byte{statesKind, 0, 0}, false},
		{"byte after the record", append(bytes.Clone(valid), 0), false},
		{"twice", append(bytes.Clone(valid), valid...), false},
		{"varint not minimal", []byte{statesKind, 0x80, 0x00}, false},
		{"varint over 64 bits", []byte{statesKind, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, false},
		{"more states than ids", binary.AppendUvarint([]byte{statesKind}, 1<<32+1), false},
		{"more states than bytes", encodeStates(5, 0, 0, 0, 0, 0, 1, 0), true},
		{"a state without a reading", encodeStates(1, 0, 0, 0, 0, 0, 0, 0), false},
		{"times short of the span", encodeStates(2, 0, 0, 300, 1, 0, 1, 100, 0, 1, 100), false},
		{"a time past the span", encodeStates(1, 0, 0, 300, 0, 0, 2, 301), false},
		{"span past the int64 range", encodeStates(1, math.MaxInt64, 0, 1, 0, 0, 2, 1), false},
		{"id past uint32", encodeStates(1, 0, 0, 0, 0, math.MaxUint32+1, 1, 0), false},
		{"a state after the largest id", encodeStates(2, 0, math.MaxUint32, 0, math.MaxUint32, math.MaxUint32, 1, 0, 0, 1, 0), false},
		{"first id past uint32", encodeStates(1, 0, math.MaxUint32+1, 0, 0, 0, 1, 0), false},
		{"first state without a reading", encodeStates(1, 0, 1, 0, 0, 0, 2, 0), false},
		{"last state without a reading", encodeStates(1, 0, 0, 0, 1, 0, 2, 0), false},
		{"one reading, two ends", encodeStates(1, 0, 0, 5, 0, 0, 1, 5), false},
		{"last before first", encodeStates(2, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0), false},
		{"count overflows", encodeStates(2, 0, 0, 0, 1, 0, math.MaxUint64, 0, 0, 1, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeStates(tc.b)
			if !errors.Is(err, ErrBadStates) {
				t.Errorf("got error %v, want ErrBadStates", err)
			}
			if eof := errors.Is(err, io.ErrUnexpectedEOF); eof != tc.eof {
				t.Errorf("got error %v: io.ErrUnexpectedEOF %v, want %v", err, eof, tc.eof)
			}
			if !equalStates(got, States{}) || got.PerState != nil {
				t.Errorf("got %+v with an error, want the zero States", got)
			}
		})
	}
	for n := range len(valid) {
		if _, err := DecodeStates(valid[:n]); !errors.Is(err, ErrBadStates) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("the first %d bytes of %x: got %v, want ErrBadStates and io.ErrUnexpectedEOF", n, valid, err)
		}
	}
}

// FuzzDecodeStates checks that DecodeStates never panics, fails only with
// ErrBadStates, that whatever it accepts is one encoding that Append gives
// back byte for byte, and that what it accepts merges and answers a query
// as a record does. Its seeds are in testdata/fuzz/FuzzDecodeStates.
func FuzzDecodeStates(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStates(b)
		if err != nil {
			if !errors.Is(err, ErrBadStates) {
				t.Fatalf("got error %v, want ErrBadStates", err)
			}
			return
		}
		if re := s.Append(nil); !bytes.Equal(re, b) {
			t.Fatalf("DecodeStates(%x) = %+v, which appends as %x", b, s, re)
		}
		var sum uint64
		for _, e := range s.PerState {
			sum += e.Count
		}
		if sum != s.Count {
			t.Fatalf("DecodeStates(%x): Count %d, states' counts add up to %d", b, s.Count, sum)
		}
		if s.IsEmpty() {
			return
		}
		merged := s.Clone()
		if err := merged.Merge(FromSamples([]Sample{s.Last})); err != nil {
			t.Fatalf("Merge of a reading at Last: %v", err)
		}
		if s.Last.TS < math.MaxInt64 && s.First.TS > math.MinInt64 {
			if _, err := s.TimeIn(StateQuery{From: s.First.TS, To: s.Last.TS + 1, Now: s.Last.TS}); err != nil {
				t.Fatalf("TimeIn over its own readings: %v", err)
			}
		}
	})
}
