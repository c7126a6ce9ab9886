package encoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/klauspost/compress/s2"
)

// Outbox entries. The store writes the readings each group commit stores,
// in the order they arrived, as one entry under AppendOutboxKey: the log
// that the checkpoint and every upstream read (a store of version 4 and
// older wrote the same entry under AppendJournalKey too). Stored
// readings are numbered from 0 in the order they were stored; an entry
// holds readings firstSeq to firstSeq+count-1.
//
// An entry (version 1) is a version byte, 1, then an S2 block
// (klauspost/compress/s2, a faster relative of Snappy's block format) of
//
//	count(uvarint) series(uvarint)
//	series × { deviceLen(uvarint) device metricLen(uvarint) metric }
//	count × { series index(uvarint) ts − ts of the reading before (zigzag
//	          varint, ns; the first from 0) value (8 bytes, IEEE 754 bits,
//	          little endian) }
//
// An entry of version 2 holds text readings too (Reading.Text). It is
// version 1 with a version byte 2, and, between the table of series and
// the readings, one byte per series of the table: 0 for a number series,
// 1 for a text series. A reading of a text series holds its text where a
// number's value is:
//
//	series index(uvarint) ts delta(zigzag varint) textLen(uvarint, 1 to
//	MaxText) text
//
// A series and its kind make one entry of the table: a number and a text
// reading of one device and metric are two of them. An entry without a
// text reading is written as version 1, byte for byte what it was before
// texts were kept.
//
// A commit of a busy gateway holds thousands of readings of a few hundred
// series: the table of series and the compression bring an entry to a few
// bytes a reading, which matters twice, for the SD card and for the
// memory Badger needs to build its tables.

const (
	// OutboxV1 is the version byte of an outbox entry of numbers only.
	OutboxV1 byte = 1
	// OutboxV2 is the version byte of an outbox entry that holds a text
	// reading.
	OutboxV2 byte = 2
	// OutboxEntryReserve is what an entry costs a transaction besides its
	// readings: key, version, counts, S2's header and the store's two
	// bytes of metadata per entry.
	OutboxEntryReserve = OutboxKeyLen + 1 + 2*binary.MaxVarintLen64 + 32 + 2
	// JournalEntryReserve is OutboxEntryReserve for a journal entry.
	JournalEntryReserve = OutboxEntryReserve
	// maxOutboxDecoded bounds the decoded size of an entry that is read.
	maxOutboxDecoded = 64 << 20
)

// ErrBadOutbox is wrapped by every error that decoding an outbox entry
// returns: an entry that is corrupt, truncated or of an unknown version.
var ErrBadOutbox = errors.New("bad outbox entry")

// OutboxReading is a reading of the outbox and its sequence number.
type OutboxReading struct {
	Seq uint64
	Reading
}

// OutboxReadingMax bounds what r adds to an entry, compressed: S2 never
// takes more than 7/6 of its input, plus its header.
func OutboxReadingMax(r *Reading) int {
	n := 2*binary.MaxVarintLen32 + len(r.Device) + len(r.Metric) + // in the table of series
		binary.MaxVarintLen32 + binary.MaxVarintLen64 + 8 // the reading
	if r.Text != "" {
		n += 1 + binary.MaxVarintLen32 + len(r.Text) // its kind, and its text
	}
	return n + n/6 + 1
}

// OutboxEncoder builds the value of one entry. Its zero value is ready to
// use; Reset makes it ready for the next entry, keeping its buffers. It
// keeps no Unit: an entry holds device, metric, time and value or text.
type OutboxEncoder struct {
	readings []byte // the readings' part, uncompressed
	count    int
	series   map[[2]string]uint64 // device and metric → index in names, number series
	texts    map[[2]string]uint64 // the same for text series
	kinds    []byte               // per index in names, 1 for a text series
	names    []byte               // the table of series, uncompressed
	ts       int64
	plain    []byte // scratch: the whole entry before compression
	packed   []byte // scratch: the entry compressed
}

// Reset empties the entry.
func (e *OutboxEncoder) Reset() {
	e.readings, e.count, e.names, e.ts = e.readings[:0], 0, e.names[:0], 0
	clear(e.series)
	if len(e.texts) > 0 {
		clear(e.texts)
	}
	e.kinds = e.kinds[:0]
}

// Count returns the number of readings added since the last Reset.
func (e *OutboxEncoder) Count() int { return e.count }

// Size bounds the size of the entry's value, compressed, with
// OutboxEntryReserve.
func (e *OutboxEncoder) Size() int {
	n := len(e.readings) + len(e.names) + len(e.kinds)
	return n + n/6 + OutboxEntryReserve
}

// Add adds r to the entry, after the readings added before it.
func (e *OutboxEncoder) Add(r *Reading) {
	if r.Text != "" {
		e.addText(r)
		return
	}
	if e.series == nil {
		e.series = make(map[[2]string]uint64)
	}
	k := [2]string{r.Device, r.Metric}
	i, ok := e.series[k]
	if !ok {
		i = e.addSeries(r, 0)
		e.series[k] = i
	}
	e.readings = binary.AppendUvarint(e.readings, i)
	e.readings = binary.AppendVarint(e.readings, r.TS-e.ts)
	e.ts = r.TS
	e.readings = binary.LittleEndian.AppendUint64(e.readings, math.Float64bits(r.Value))
	e.count++
}

// addText is Add for a text reading.
func (e *OutboxEncoder) addText(r *Reading) {
	if e.texts == nil {
		e.texts = make(map[[2]string]uint64)
	}
	k := [2]string{r.Device, r.Metric}
	i, ok := e.texts[k]
	if !ok {
		i = e.addSeries(r, 1)
		e.texts[k] = i
	}
	e.readings = binary.AppendUvarint(e.readings, i)
	e.readings = binary.AppendVarint(e.readings, r.TS-e.ts)
	e.ts = r.TS
	e.readings = binary.AppendUvarint(e.readings, uint64(len(r.Text)))
	e.readings = append(e.readings, r.Text...)
	e.count++
}

// addSeries adds r's series, of kind (1: text), to the table and returns
// its index.
func (e *OutboxEncoder) addSeries(r *Reading, kind byte) uint64 {
	i := uint64(len(e.kinds))
	e.kinds = append(e.kinds, kind)
	e.names = binary.AppendUvarint(e.names, uint64(len(r.Device)))
	e.names = append(e.names, r.Device...)
	e.names = binary.AppendUvarint(e.names, uint64(len(r.Metric)))
	e.names = append(e.names, r.Metric...)
	return i
}

// Value returns the entry's encoding, in a new slice.
func (e *OutboxEncoder) Value() []byte {
	p := binary.AppendUvarint(e.plain[:0], uint64(e.count))
	p = binary.AppendUvarint(p, uint64(len(e.kinds)))
	p = append(p, e.names...)
	version := OutboxV1
	if len(e.texts) > 0 {
		version = OutboxV2
		p = append(p, e.kinds...)
	}
	p = append(p, e.readings...)
	e.plain = p
	// Compressed into scratch space of the worst case's size, then
	// copied into a slice of its own size: the entry is a third of that
	// or less, and what is allocated sets how soon the GC runs.
	if n := s2.MaxEncodedLen(len(p)); cap(e.packed) < n {
		e.packed = make([]byte, n)
	}
	packed := s2.Encode(e.packed[:cap(e.packed)], p)
	v := make([]byte, 1+len(packed))
	v[0] = version
	copy(v[1:], packed)
	return v
}

// outboxBody decompresses an entry into buf (which it returns, grown if
// need be) and returns the body after the count, and the count.
func outboxBody(v, buf []byte) (decoded, body []byte, count uint64, err error) {
	if len(v) < 2 || (v[0] != OutboxV1 && v[0] != OutboxV2) {
		return buf, nil, 0, ErrBadOutbox
	}
	n, err := s2.DecodedLen(v[1:])
	if err != nil || n > maxOutboxDecoded {
		return buf, nil, 0, ErrBadOutbox
	}
	if decoded, err = s2.Decode(buf[:cap(buf)], v[1:]); err != nil {
		return buf, nil, 0, fmt.Errorf("%w: %v", ErrBadOutbox, err)
	}
	count, k := binary.Uvarint(decoded)
	if k <= 0 {
		return decoded, nil, 0, ErrBadOutbox
	}
	return decoded, decoded[k:], count, nil
}

// OutboxCount returns the number of readings of an entry, as its header
// says, decompressing it but not decoding its readings. An entry that
// OutboxDecoder decodes holds that many; an error wraps ErrBadOutbox.
func OutboxCount(v []byte) (uint64, error) {
	_, _, n, err := outboxBody(v, nil)
	return n, err
}

// OutboxDecoder decodes entries, reusing its buffers and interning
// device and metric names across them. Its zero value is ready to use.
type OutboxDecoder struct {
	buf    []byte
	names  map[string]string
	series [][2]string
	kinds  []byte
	texts  map[string]string // texts interned, as names are
}

// Decode calls fn with each reading of the entry v whose first reading is
// seq, in order, until fn returns false. It returns an error wrapping
// ErrBadOutbox if v is not a whole, valid entry; fn may have been called
// with the readings before the fault. The readings' Unit is ""; a text
// reading has its Text, and Value 0.
func (d *OutboxDecoder) Decode(seq uint64, v []byte, fn func(OutboxReading) bool) error {
	if d.names == nil {
		d.names = make(map[string]string)
	}
	var p []byte
	var count uint64
	var err error
	d.buf, p, count, err = outboxBody(v, d.buf)
	if err != nil {
		return err
	}
	nseries, k := binary.Uvarint(p)
	if k <= 0 || nseries > uint64(len(p)) {
		return fmt.Errorf("%w: table of series", ErrBadOutbox)
	}
	p = p[k:]
	name := func() (string, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n == 0 || n > uint64(len(p)-k) {
			return "", false
		}
		b := p[k : k+int(n)]
		p = p[k+int(n):]
		s, ok := d.names[string(b)]
		if !ok {
			s = string(b)
			d.names[s] = s
		}
		return s, true
	}
	d.series = d.series[:0]
	for range nseries {
		dev, ok1 := name()
		met, ok2 := name()
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: table of series", ErrBadOutbox)
		}
		d.series = append(d.series, [2]string{dev, met})
	}
	d.kinds = d.kinds[:0]
	if v[0] == OutboxV2 {
		if uint64(len(p)) < nseries {
			return fmt.Errorf("%w: kinds of series", ErrBadOutbox)
		}
		d.kinds = append(d.kinds, p[:nseries]...)
		p = p[nseries:]
		for _, k := range d.kinds {
			if k > 1 {
				return fmt.Errorf("%w: kind %d of a series", ErrBadOutbox, k)
			}
		}
	}
	var r OutboxReading
	for i := uint64(0); i < count; i++ {
		idx, k := binary.Uvarint(p)
		if k <= 0 || idx >= uint64(len(d.series)) {
			return fmt.Errorf("%w: reading %d: series", ErrBadOutbox, i)
		}
		p = p[k:]
		delta, k := binary.Varint(p)
		if k <= 0 {
			return fmt.Errorf("%w: reading %d: truncated", ErrBadOutbox, i)
		}
		p = p[k:]
		r.Device, r.Metric = d.series[idx][0], d.series[idx][1]
		r.TS += delta
		if len(d.kinds) > 0 && d.kinds[idx] == 1 {
			text, rest, err := d.text(p)
			if err != nil {
				return fmt.Errorf("%w: reading %d: %v", ErrBadOutbox, i, err)
			}
			r.Value, r.Text, p = 0, text, rest
		} else {
			if len(p) < 8 {
				return fmt.Errorf("%w: reading %d: truncated", ErrBadOutbox, i)
			}
			r.Value, r.Text = math.Float64frombits(binary.LittleEndian.Uint64(p)), ""
			p = p[8:]
		}
		r.Seq = seq + i
		if !fn(r) {
			return nil
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the last reading", ErrBadOutbox, len(p))
	}
	return nil
}

// text reads the text of a reading at the start of p, interned, and
// returns it and what follows it.
func (d *OutboxDecoder) text(p []byte) (string, []byte, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n == 0 || n > MaxText || n > uint64(len(p)-k) {
		return "", nil, errors.New("text")
	}
	b := p[k : k+int(n)]
	if d.texts == nil {
		d.texts = make(map[string]string)
	}
	s, ok := d.texts[string(b)]
	if !ok {
		if len(d.texts) >= maxInterned {
			clear(d.texts)
		}
		s = string(b)
		d.texts[s] = s
	}
	return s, p[k+int(n):], nil
}

// maxInterned bounds the texts an OutboxDecoder keeps interned.
const maxInterned = 4096

// OutboxMeta is the value of the meta key MetaOutbox: where the uplink
// stands.
//
//	cursor(8B BE) batchStart(8B BE) batchEnd(8B BE) batchNote(8B BE)
type OutboxMeta struct {
	// Cursor is the first reading not yet accepted upstream.
	Cursor uint64
	// BatchStart and BatchEnd are the batch being sent, and BatchNote
	// what the sender recorded with it; the batch holds only when
	// BatchStart is Cursor.
	BatchStart, BatchEnd uint64
	BatchNote            int64
}

// outboxMetaLen is the length of an OutboxMeta's encoding.
const outboxMetaLen = 32

// AppendOutboxMeta appends the encoding of m to dst.
func AppendOutboxMeta(dst []byte, m OutboxMeta) []byte {
	dst = binary.BigEndian.AppendUint64(dst, m.Cursor)
	dst = binary.BigEndian.AppendUint64(dst, m.BatchStart)
	dst = binary.BigEndian.AppendUint64(dst, m.BatchEnd)
	return binary.BigEndian.AppendUint64(dst, uint64(m.BatchNote))
}

// ParseOutboxMeta parses a value written by AppendOutboxMeta.
func ParseOutboxMeta(v []byte) (OutboxMeta, error) {
	if len(v) != outboxMetaLen {
		return OutboxMeta{}, fmt.Errorf("meta %s: %d bytes, want %d", MetaOutbox, len(v), outboxMetaLen)
	}
	return OutboxMeta{
		Cursor:     binary.BigEndian.Uint64(v),
		BatchStart: binary.BigEndian.Uint64(v[8:]),
		BatchEnd:   binary.BigEndian.Uint64(v[16:]),
		BatchNote:  int64(binary.BigEndian.Uint64(v[24:])),
	}, nil
}

// CursorMeta is the value of an upstream's MetaCursor key: where it
// stands, and how many readings the disk cap dropped before it sent them;
// while it sends its newest readings ahead of a backlog, also where that
// live stream stands:
//
//	OutboxMeta(32B) dropped(8B BE) [mark(8B BE) live(8B BE) liveBatchEnd(8B BE) liveBatchNote(8B BE)]
type CursorMeta struct {
	OutboxMeta
	Dropped uint64
	// Live, when not 0, is the first reading of the live stream not yet
	// accepted upstream: readings Mark to Live-1 were, ahead of the
	// backlog Cursor to Mark-1. LiveBatchEnd, when above Live, ends the
	// live batch being sent, with LiveBatchNote.
	Mark, Live    uint64
	LiveBatchEnd  uint64
	LiveBatchNote int64
}

// AppendCursorMeta appends the encoding of m to dst.
func AppendCursorMeta(dst []byte, m CursorMeta) []byte {
	dst = binary.BigEndian.AppendUint64(AppendOutboxMeta(dst, m.OutboxMeta), m.Dropped)
	if m.Live == 0 {
		return dst
	}
	dst = binary.BigEndian.AppendUint64(dst, m.Mark)
	dst = binary.BigEndian.AppendUint64(dst, m.Live)
	dst = binary.BigEndian.AppendUint64(dst, m.LiveBatchEnd)
	return binary.BigEndian.AppendUint64(dst, uint64(m.LiveBatchNote))
}

// ParseCursorMeta parses a value written by AppendCursorMeta.
func ParseCursorMeta(v []byte) (CursorMeta, error) {
	if len(v) != outboxMetaLen+8 && len(v) != outboxMetaLen+40 {
		return CursorMeta{}, fmt.Errorf("meta %s: %d bytes, want %d or %d", MetaCursor, len(v), outboxMetaLen+8, outboxMetaLen+40)
	}
	m, err := ParseOutboxMeta(v[:outboxMetaLen])
	c := CursorMeta{OutboxMeta: m, Dropped: binary.BigEndian.Uint64(v[outboxMetaLen:])}
	if l := v[outboxMetaLen+8:]; len(l) > 0 {
		c.Mark, c.Live = binary.BigEndian.Uint64(l), binary.BigEndian.Uint64(l[8:])
		c.LiveBatchEnd, c.LiveBatchNote = binary.BigEndian.Uint64(l[16:]), int64(binary.BigEndian.Uint64(l[24:]))
		if c.Live == 0 || c.Mark > c.Live || c.Cursor >= c.Mark {
			return CursorMeta{}, fmt.Errorf("meta %s: live stream from %d to %d, cursor %d", MetaCursor, c.Mark, c.Live, c.Cursor)
		}
	}
	return c, err
}
