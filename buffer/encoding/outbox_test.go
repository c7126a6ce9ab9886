package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
)

// outboxReadings makes up to 500 readings from data: per reading a series
// byte (one of 8 names, some sharing a device; with its high bit set, a
// text reading, whose text the value's bits choose), a timestamp delta
// and the value's bits.
func outboxReadings(data []byte) []Reading {
	names := [][2]string{{"d", "m"}, {"d", "n"}, {"kitchen/door", "contact"}, {"温室 1", "温度"},
		{"e", "m"}, {"a b", "c=d,e"}, {"x", "y"}, {"d", "mm"}}
	c := byteCursor{b: data}
	var rs []Reading
	ts := int64(0)
	for len(rs) < 500 {
		sel := c.byte()
		ts += c.varint()
		v := math.Float64frombits(c.uint64())
		if c.err != nil {
			break
		}
		n := names[int(sel&0x7f)%len(names)]
		if sel&0x80 != 0 {
			texts := []string{"heat", "off", "Küche an", "x", "long_push", strings.Repeat("é", MaxText/2)}
			rs = append(rs, Reading{Device: n[0], Metric: n[1], TS: ts, Text: texts[math.Float64bits(v)%uint64(len(texts))]})
			continue
		}
		rs = append(rs, Reading{Device: n[0], Metric: n[1], TS: ts, Value: v})
	}
	return rs
}

func encodeOutbox(rs []Reading) []byte {
	var e OutboxEncoder
	for i := range rs {
		e.Add(&rs[i])
	}
	return e.Value()
}

// sameReadings reports whether got are the readings want from seq on,
// values compared bit for bit.
func sameReadings(got []OutboxReading, seq uint64, want []Reading) bool {
	if len(got) != len(want) {
		return false
	}
	for i, r := range got {
		w := want[i]
		if r.Seq != seq+uint64(i) || r.Device != w.Device || r.Metric != w.Metric || r.TS != w.TS ||
			math.Float64bits(r.Value) != math.Float64bits(w.Value) || r.Text != w.Text || r.Unit != "" {
			return false
		}
	}
	return true
}

func TestOutboxEncoder_ResetAndSize(t *testing.T) {
	var e OutboxEncoder
	rs := outboxReadings([]byte("\x00\x02\x01\x02\x03\x04\x05\x06\x07\x08\x01\x04\x01\x02\x03\x04\x05\x06\x07\x08"))
	for i := range rs {
		e.Add(&rs[i])
	}
	e.Reset()
	if e.Count() != 0 {
		t.Fatalf("Count after Reset: %d", e.Count())
	}
	max := OutboxEntryReserve
	for i := range rs {
		e.Add(&rs[i])
		max += OutboxReadingMax(&rs[i])
	}
	v := e.Value()
	if len(v) > e.Size() || e.Size() > max {
		t.Errorf("entry of %d bytes; Size %d, bound by OutboxReadingMax %d", len(v), e.Size(), max)
	}
	var d OutboxDecoder
	var got []OutboxReading
	if err := d.Decode(7, v, func(r OutboxReading) bool { got = append(got, r); return true }); err != nil || !sameReadings(got, 7, rs) {
		t.Errorf("after Reset: got %+v, %v; want %+v", got, err, rs)
	}
}

// FuzzOutboxRoundTrip: any readings encode to an entry that decodes to
// them, in order and numbered from the entry's seq, and whose count
// OutboxCount reads.
func FuzzOutboxRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x0a\x00\x00\x00\x00\x00\x00\x35\x40\x03\x02\x7f\xf8\x00\x00\x00\x00\x00\x01"))
	f.Add([]byte("\x05\x01\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x80\x0a\x00\x00\x00\x00\x00\x00\x00\x01\x00\x02\x00\x00\x00\x00\x00\x00\x35\x40\x80\x00\x00\x00\x00\x00\x00\x00\x00\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs := outboxReadings(data)
		v := encodeOutbox(rs)
		if n, err := OutboxCount(v); err != nil || n != uint64(len(rs)) {
			t.Fatalf("OutboxCount: %d, %v; want %d", n, err, len(rs))
		}
		var d OutboxDecoder
		var got []OutboxReading
		seq := uint64(len(data)) << 40
		if err := d.Decode(seq, v, func(r OutboxReading) bool { got = append(got, r); return true }); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !sameReadings(got, seq, rs) {
			t.Fatalf("round trip: got %+v, want %+v", got, rs)
		}
	})
}

// FuzzDecodeOutbox: decoding any bytes never panics, fails with
// ErrBadOutbox or gives as many readings as OutboxCount says, and what
// decodes encodes again to an entry that decodes to the same readings.
func FuzzDecodeOutbox(f *testing.F) {
	var e OutboxEncoder
	e.Add(&Reading{Device: "d", Metric: "m", TS: 5, Value: 1})
	e.Add(&Reading{Device: "d", Metric: "n", TS: -5, Value: math.NaN()})
	f.Add(e.Value())
	e.Add(&Reading{Device: "d", Metric: "mode", TS: 6, Text: "heat"})
	e.Add(&Reading{Device: "d", Metric: "m", TS: 7, Value: 2})
	e.Add(&Reading{Device: "d", Metric: "mode", TS: 8, Text: "off"})
	f.Add(e.Value())
	f.Add([]byte{OutboxV1, 1, 0, 0, 0})
	f.Add([]byte{OutboxV2, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var got []OutboxReading
		var d OutboxDecoder
		err := d.Decode(3, v, func(r OutboxReading) bool { got = append(got, r); return true })
		if err != nil {
			if !errors.Is(err, ErrBadOutbox) {
				t.Fatalf("error %v does not wrap ErrBadOutbox", err)
			}
			return
		}
		if c, err := OutboxCount(v); err != nil || c != uint64(len(got)) {
			t.Fatalf("decoded %d readings of an entry of %d (%v)", len(got), c, err)
		}
		rs := make([]Reading, len(got))
		for i, r := range got {
			rs[i] = r.Reading
		}
		var again []OutboxReading
		if err := d.Decode(3, encodeOutbox(rs), func(r OutboxReading) bool { again = append(again, r); return true }); err != nil || !sameReadings(again, 3, rs) {
			t.Fatalf("re-encoded entry: got %+v, %v; want %+v", again, err, rs)
		}
	})
}

// An entry of numbers only is of version 1, byte for byte as before texts
// were kept (a cairn of keyspace version 5 reads it); one with a text
// reading is of version 2, and carries the text.
func TestOutboxEncoder_VersionByKind(t *testing.T) {
	var e OutboxEncoder
	e.Add(&Reading{Device: "d", Metric: "t", TS: 1000, Value: 21.5})
	e.Add(&Reading{Device: "d", Metric: "t", TS: 2000, Value: 21.5})
	v1 := e.Value()
	// count 2, 1 series, "d" "t", then (0, +1000, 21.5) and (0, +1000, 21.5).
	plain := []byte{2, 1, 1, 'd', 1, 't', 0, 0xd0, 0x0f, 0, 0, 0, 0, 0, 0x80, 0x35, 0x40, 0, 0xd0, 0x0f, 0, 0, 0, 0, 0, 0x80, 0x35, 0x40}
	if v1[0] != OutboxV1 {
		t.Fatalf("numbers only: version %d, want 1", v1[0])
	}
	if got, err := s2.Decode(nil, v1[1:]); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("numbers only: body % x (%v), want % x", got, err, plain)
	}
	e.Add(&Reading{Device: "d", Metric: "t", TS: 3000, Text: "heat"})
	v2 := e.Value()
	if v2[0] != OutboxV2 {
		t.Fatalf("with a text: version %d, want 2", v2[0])
	}
	var got []OutboxReading
	var d OutboxDecoder
	if err := d.Decode(0, v2, func(r OutboxReading) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].Text != "heat" || got[2].Value != 0 || got[1].Text != "" || got[1].Value != 21.5 {
		t.Errorf("decoded %+v", got)
	}
}

func FuzzParseOutboxMeta(f *testing.F) {
	f.Add(AppendOutboxMeta(nil, OutboxMeta{Cursor: 5, BatchStart: 5, BatchEnd: 9, BatchNote: -1}))
	f.Add(AppendOutboxMeta(nil, OutboxMeta{Cursor: math.MaxUint64}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, v []byte) {
		m, err := ParseOutboxMeta(v)
		if err != nil {
			if len(v) == 32 {
				t.Fatalf("32 bytes refused: %v", err)
			}
			return
		}
		if got := AppendOutboxMeta(nil, m); string(got) != string(v) {
			t.Fatalf("round trip: %x → %+v → %x", v, m, got)
		}
		if binary.BigEndian.Uint64(v) != m.Cursor {
			t.Fatalf("cursor %d, want the first 8 bytes", m.Cursor)
		}
	})
}

func FuzzParseCursorMeta(f *testing.F) {
	f.Add(AppendCursorMeta(nil, CursorMeta{OutboxMeta: OutboxMeta{Cursor: 5, BatchStart: 5, BatchEnd: 9}, Dropped: 3}))
	f.Add(AppendCursorMeta(nil, CursorMeta{OutboxMeta: OutboxMeta{Cursor: 5}, Mark: 100, Live: 140, LiveBatchEnd: 150, LiveBatchNote: -1}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, v []byte) {
		m, err := ParseCursorMeta(v)
		if err != nil {
			if len(v) == 40 {
				t.Fatalf("40 bytes refused: %v", err)
			}
			return
		}
		if got := AppendCursorMeta(nil, m); string(got) != string(v) {
			t.Fatalf("round trip: %x → %+v → %x", v, m, got)
		}
		if m.Live != 0 && (m.Cursor >= m.Mark || m.Mark > m.Live) {
			t.Fatalf("accepted a live stream out of order: %+v", m)
		}
	})
}
