package buffer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"

	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The outbox holds what the uplink has still to send. A Writer with
// WriterOptions.Outbox set writes the readings each group commit stores, in
// the order they arrived, as one entry of that commit's transaction:
//
//	'O' firstSeq(8B BE) → outbox entry
//
// The outbox's kind sorts before every other (keyspace version 4; it was
// 'o' before). While the upstream is down it is most of the store, and new
// entries come at its end: a table that holds them with keys of other
// kinds then spans no older entry, so Badger's compactions leave the older
// ones where they are. Sorted among the other kinds, every such table
// spanned the whole outbox, and each compaction of one rewrote it all (a
// hundred tables at 10 M readings, mapped and built in memory at once).
//
// Stored readings are numbered from 0 in the order they were stored, for
// the life of the data directory; an entry holds readings firstSeq to
// firstSeq+count-1. The uplink reads from its cursor (the first reading not
// yet accepted upstream), records the batch it is about to send (so that a
// restart sends the same batch again, under the same id), and moves the
// cursor on once the upstream took it; entries wholly behind the cursor are
// then deleted. The cursor and the batch are the meta value "outbox":
// cursor(8B BE) batchStart(8B BE) batchEnd(8B BE) batchNote(8B BE).
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
// A commit of a busy gateway holds thousands of readings of a few hundred
// series: the table of series and the compression bring an entry to a few
// bytes a reading, which matters twice, for the SD card and for the
// memory Badger needs to build its tables.
const (
	kindOutbox keyKind = 'O'
	// kindOutboxV3 is where keyspace versions 1 to 3 kept the outbox
	// (see moveOutbox).
	kindOutboxV3 keyKind = 'o'
	outboxV1     byte    = 1
	metaOutbox           = "outbox"
	metaDropped          = "dropped_unsent" // uint64 BE: readings DropOutbox removed unsent
	outboxKeyLen         = 1 + 8
	// outboxEntryReserve is what an entry costs besides its readings: key,
	// version, counts, S2's header and Badger's metadata.
	outboxEntryReserve = outboxKeyLen + 1 + 2*binary.MaxVarintLen64 + 32 + 2
	// maxOutboxDecoded bounds the decoded size of an entry that is read.
	maxOutboxDecoded = 64 << 20
)

// OutboxReading is a reading of the outbox and its sequence number.
type OutboxReading struct {
	Seq uint64
	Reading
}

// OutboxState is where the outbox stands.
type OutboxState struct {
	// End is the sequence number the next stored reading will get:
	// readings Cursor to End-1 are unsent.
	End uint64
	// Cursor is the first reading not yet accepted upstream.
	Cursor uint64
	// BatchEnd, when above Cursor, ends the batch that was being sent
	// from Cursor: it must be sent again as it was. BatchNote is what the
	// sender recorded with it (the uplink: its max_age cutoff).
	BatchEnd  uint64
	BatchNote int64
}

// Pending is the number of readings not yet sent.
func (o OutboxState) Pending() uint64 { return o.End - o.Cursor }

// outbox is the Store's view of the outbox.
type outbox struct {
	// write serializes the outbox's own writes (the uplink's and
	// DropOutbox's) from their reading of the state to its update; held
	// before Store.syncMu and mu.
	write sync.Mutex
	mu    sync.Mutex    // guards the fields below
	state OutboxState   // End is the end of what is synced: all the uplink sees
	end   uint64        // the end of what is committed: the Writer numbers from it
	low   uint64        // no entry starts below low: where deletion resumes
	wake  chan struct{} // signalled after a sync that added readings
	// batchStart is where the batch recorded by SetOutboxBatch starts; the
	// cursor once no batch is recorded.
	batchStart uint64
	// badNewest is 1 + the sequence number of the newest entry when Open
	// could not read it (0: none), with why and its size.
	badNewest    uint64
	badNewestErr error
	badNewestLen int
	// dropped counts the readings DropOutbox removed unsent, for the life
	// of the data directory (meta "dropped_unsent").
	dropped uint64
}

func appendOutboxKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, byte(kindOutbox)), seq)
}

// outboxReadingMax bounds what r adds to an entry, compressed: S2 never
// takes more than 7/6 of its input, plus its header.
func outboxReadingMax(r *Reading) int {
	n := 2*binary.MaxVarintLen32 + len(r.Device) + len(r.Metric) + // in the table of series
		binary.MaxVarintLen32 + binary.MaxVarintLen64 + 8 // the reading
	return n + n/6 + 1
}

// outboxEncoder builds the value of one entry.
type outboxEncoder struct {
	readings []byte // the readings' part, uncompressed
	count    int
	series   map[[2]string]uint64 // device and metric → index in names
	names    []byte               // the table of series, uncompressed
	ts       int64
	plain    []byte // scratch: the whole entry before compression
}

func (e *outboxEncoder) reset() {
	e.readings, e.count, e.names, e.ts = e.readings[:0], 0, e.names[:0], 0
	clear(e.series)
}

// size bounds the size of the entry's value, compressed.
func (e *outboxEncoder) size() int {
	n := len(e.readings) + len(e.names)
	return n + n/6 + outboxEntryReserve
}

func (e *outboxEncoder) add(r *Reading) {
	if e.series == nil {
		e.series = make(map[[2]string]uint64)
	}
	k := [2]string{r.Device, r.Metric}
	i, ok := e.series[k]
	if !ok {
		i = uint64(len(e.series))
		e.series[k] = i
		e.names = binary.AppendUvarint(e.names, uint64(len(r.Device)))
		e.names = append(e.names, r.Device...)
		e.names = binary.AppendUvarint(e.names, uint64(len(r.Metric)))
		e.names = append(e.names, r.Metric...)
	}
	e.readings = binary.AppendUvarint(e.readings, i)
	e.readings = binary.AppendVarint(e.readings, r.TS-e.ts)
	e.ts = r.TS
	e.readings = binary.LittleEndian.AppendUint64(e.readings, math.Float64bits(r.Value))
	e.count++
}

// value returns the entry's encoding, in a new slice.
func (e *outboxEncoder) value() []byte {
	p := binary.AppendUvarint(e.plain[:0], uint64(e.count))
	p = binary.AppendUvarint(p, uint64(len(e.series)))
	p = append(p, e.names...)
	p = append(p, e.readings...)
	e.plain = p
	v := make([]byte, 1, 1+s2.MaxEncodedLen(len(p)))
	v[0] = outboxV1
	return append(v, s2.Encode(v[1:cap(v)], p)...)
}

var errBadOutbox = errors.New("bad outbox entry")

// CorruptOutboxError is returned by ReadOutbox when the entry holding the
// first reading asked for cannot be decoded (a bad block on the card, say).
// The readings From to To-1 cannot be sent; they are still in the store.
// The caller moves the cursor past them (AdvanceOutbox(To)) and says so.
type CorruptOutboxError struct {
	From, To uint64
	Entry    uint64 // the sequence number the entry starts at
	Value    []byte // the entry as stored
	Err      error
}

func (e *CorruptOutboxError) Error() string {
	return fmt.Sprintf("outbox entry %d cannot be read (readings %d to %d are not sent): %v", e.Entry, e.From, e.To-1, e.Err)
}

func (e *CorruptOutboxError) Unwrap() error { return e.Err }

// corruptEntryEnd returns where the entry at seq, which cannot be decoded,
// ends: where the next entry starts, or, for the last one, at the end of
// the outbox (at least one reading on). It reads a snapshot of its own: a
// read-write transaction allows one iterator at a time.
func (s *Store) corruptEntryEnd(seq, end uint64) uint64 {
	next := max(end, seq+1)
	s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}})
		defer it.Close()
		if it.Seek(appendOutboxKey(nil, seq+1)); it.Valid() {
			next = binary.BigEndian.Uint64(it.Item().Key()[1:])
		}
		return nil
	})
	return next
}

// outboxBody decompresses an entry into buf (which it returns, grown if
// need be) and returns the body after the count, and the count.
func outboxBody(v, buf []byte) (decoded, body []byte, count uint64, err error) {
	if len(v) < 2 || v[0] != outboxV1 {
		return buf, nil, 0, errBadOutbox
	}
	n, err := s2.DecodedLen(v[1:])
	if err != nil || n > maxOutboxDecoded {
		return buf, nil, 0, errBadOutbox
	}
	if decoded, err = s2.Decode(buf[:cap(buf)], v[1:]); err != nil {
		return buf, nil, 0, fmt.Errorf("%w: %v", errBadOutbox, err)
	}
	count, k := binary.Uvarint(decoded)
	if k <= 0 {
		return decoded, nil, 0, errBadOutbox
	}
	return decoded, decoded[k:], count, nil
}

// outboxCount returns the number of readings of an entry.
func outboxCount(v []byte) (uint64, error) {
	_, _, n, err := outboxBody(v, nil)
	return n, err
}

// outboxDecoder decodes entries, reusing its buffers and interning
// device and metric names across them.
type outboxDecoder struct {
	buf    []byte
	names  map[string]string
	series [][2]string
}

// decode calls fn with each reading of the entry whose first reading is
// seq, until fn returns false.
func (d *outboxDecoder) decode(seq uint64, v []byte, fn func(OutboxReading) bool) error {
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
		return fmt.Errorf("%w: table of series", errBadOutbox)
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
			return fmt.Errorf("%w: table of series", errBadOutbox)
		}
		d.series = append(d.series, [2]string{dev, met})
	}
	var r OutboxReading
	for i := uint64(0); i < count; i++ {
		idx, k := binary.Uvarint(p)
		if k <= 0 || idx >= uint64(len(d.series)) {
			return fmt.Errorf("%w: reading %d: series", errBadOutbox, i)
		}
		p = p[k:]
		delta, k := binary.Varint(p)
		if k <= 0 || len(p) < k+8 {
			return fmt.Errorf("%w: reading %d: truncated", errBadOutbox, i)
		}
		r.Device, r.Metric = d.series[idx][0], d.series[idx][1]
		r.TS += delta
		r.Value = math.Float64frombits(binary.LittleEndian.Uint64(p[k:]))
		p = p[k+8:]
		r.Seq = seq + i
		if !fn(r) {
			return nil
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the last reading", errBadOutbox, len(p))
	}
	return nil
}

// moveOutbox moves the outbox of a directory written before keyspace
// version 4 to where version 4 keeps it, entry by entry and unchanged, in
// transactions that each delete what they move and are synced: a crash in
// between leaves the rest to the next Open, which looks for entries at the
// old place whatever version the directory records. The first of them
// records version 4, so that an older cairn, which would not find the
// moved entries, refuses the directory from then on.
func (s *Store) moveOutbox() error {
	type entry struct{ key, value []byte }
	moved := 0
	for {
		var batch []entry
		budget := newTxnBudget(s.db, 0)
		budget.take(appendMetaKey(nil, metaSchema), appendUint64(nil, schemaVersion))
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutboxV3)}})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				fits := item.ValueSize() <= int64(s.maxValue) &&
					budget.takeSize(int64(len(item.Key()))+item.ValueSize()+2) && budget.take(item.Key(), nil)
				if !fits && len(batch) > 0 {
					break
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				batch = append(batch, entry{item.KeyCopy(nil), v})
				if !fits {
					// Written with a larger memtable: moved alone, its
					// value goes to Badger's value log.
					break
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("move the outbox: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		err = s.update(func(txn *badger.Txn) error {
			if err := txn.Set(appendMetaKey(nil, metaSchema), appendUint64(nil, schemaVersion)); err != nil {
				return err
			}
			for _, e := range batch {
				if err := txn.Set(append([]byte{byte(kindOutbox)}, e.key[1:]...), e.value); err != nil {
					return err
				}
				if err := txn.Delete(e.key); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && !s.noSync {
			err = s.db.Sync()
		}
		if err != nil {
			return fmt.Errorf("move the outbox: %w", err)
		}
		moved += len(batch)
	}
	if moved > 0 {
		s.log.Info("moved the outbox's entries to where this version keeps them", "entries", moved)
	}
	return nil
}

// loadOutbox reads the cursor and finds the end and the lowest entry.
func (s *Store) loadOutbox(txn *badger.Txn) error {
	o := &s.outbox
	o.wake = make(chan struct{}, 1)
	item, err := txn.Get(appendMetaKey(nil, metaOutbox))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		if err := item.Value(func(v []byte) error {
			if len(v) != 32 {
				return fmt.Errorf("meta %s: %d bytes, want 32", metaOutbox, len(v))
			}
			o.state.Cursor = binary.BigEndian.Uint64(v)
			if binary.BigEndian.Uint64(v[8:]) == o.state.Cursor {
				o.state.BatchEnd = binary.BigEndian.Uint64(v[16:])
				o.state.BatchNote = int64(binary.BigEndian.Uint64(v[24:]))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if o.dropped, err = getUint64(txn, metaDropped); err != nil {
		return err
	}
	o.state.End, o.low, o.batchStart = o.state.Cursor, o.state.Cursor, o.state.Cursor
	defer func() { o.end = o.state.End }()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}})
	defer it.Close()
	it.Rewind()
	if !it.Valid() {
		return nil
	}
	o.low = min(o.low, binary.BigEndian.Uint64(it.Item().Key()[1:]))
	rit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}, Reverse: true})
	defer rit.Close()
	rit.Seek(appendOutboxKey(nil, math.MaxUint64))
	item = rit.Item()
	first := binary.BigEndian.Uint64(item.Key()[1:])
	return item.Value(func(v []byte) error {
		n, err := outboxCount(v)
		if err != nil {
			// Where it ends is lost with it, and so where the next entry
			// starts: Open deletes it (dropBadNewest), and the outbox ends
			// where it began.
			o.badNewest, o.badNewestErr, o.badNewestLen = first+1, err, len(v)
			n = 0
		}
		o.state.End = max(o.state.End, first+n)
		return nil
	})
}

// dropBadNewest deletes the newest outbox entry when loadOutbox could not
// read it, and says so: its readings (how many is unknown) stay in the
// store but cannot be sent.
func (s *Store) dropBadNewest() error {
	o := &s.outbox
	if o.badNewest == 0 {
		return nil
	}
	seq := o.badNewest - 1
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(appendOutboxKey(nil, seq)) }); err != nil {
		return fmt.Errorf("delete the unreadable outbox entry %d: %w", seq, err)
	}
	s.log.Error("the newest outbox entry cannot be read: deleted it; its readings stay in the store but are not sent upstream",
		"entry", seq, "bytes", o.badNewestLen, "err", o.badNewestErr)
	o.badNewest = 0
	// A batch recorded across it ends where it began.
	o.state.BatchEnd = min(o.state.BatchEnd, o.state.End)
	return nil
}

// Outbox returns where the outbox stands.
func (s *Store) Outbox() OutboxState {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	return s.outbox.state
}

// OutboxWake is signalled after a group commit adds readings to the
// outbox. It holds one signal at most: check Outbox after each.
func (s *Store) OutboxWake() <-chan struct{} { return s.outbox.wake }

// outboxEnd is the sequence number of the next reading the Writer stores.
func (s *Store) outboxEnd() uint64 {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	return s.outbox.end
}

// outboxAdded records that a commit stored n readings from the end on.
func (s *Store) outboxAdded(n uint64) {
	s.outbox.mu.Lock()
	s.outbox.end += n
	s.outbox.mu.Unlock()
}

// outboxSynced shows the uplink what the last sync made durable: it
// never sends a reading that a power cut could still take back (and whose
// number a later reading would then get).
func (s *Store) outboxSynced() {
	s.outbox.mu.Lock()
	grew := s.outbox.end > s.outbox.state.End
	s.outbox.state.End = s.outbox.end
	s.outbox.mu.Unlock()
	if grew {
		select {
		case s.outbox.wake <- struct{}{}:
		default:
		}
	}
}

// ReadOutbox appends to dst the readings from sequence number from on, at
// most max of them, in the order they were stored. Each one's Unit is the
// unit its series has when it is read ("" when its series has none, or
// is no longer in the index): a unit belongs to a series, not to a
// reading, and the outbox does not keep it (unit.go).
func (s *Store) ReadOutbox(from uint64, max int, dst []OutboxReading) ([]OutboxReading, error) {
	if max <= 0 {
		return dst, nil
	}
	want := len(dst) + max
	first := len(dst)
	err := s.db.View(func(txn *badger.Txn) error {
		// The entry holding from starts at from or before it.
		start := appendOutboxKey(nil, from)
		rit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}, Reverse: true})
		rit.Seek(start)
		if rit.Valid() {
			start = rit.Item().KeyCopy(nil)
		}
		rit.Close()
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}, PrefetchValues: false})
		defer it.Close()
		var dec outboxDecoder
		had := len(dst)
		for it.Seek(start); it.Valid() && len(dst) < want; it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			n := len(dst)
			var bad error
			err := item.Value(func(v []byte) error {
				bad = dec.decode(seq, v, func(r OutboxReading) bool {
					if r.Seq >= from {
						dst = append(dst, r)
					}
					return len(dst) < want
				})
				if bad != nil && n == had {
					bad = &CorruptOutboxError{From: from, Entry: seq, Value: slices.Clone(v), Err: bad}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("outbox entry %d: %w", seq, err)
			}
			if bad != nil {
				// What the entry gave before it failed is not trusted; the
				// readings before it go now, the entry is reported next.
				dst = dst[:n]
				if ce, ok := bad.(*CorruptOutboxError); ok {
					ce.To = s.corruptEntryEnd(seq, s.Outbox().End)
					return ce
				}
				return nil
			}
		}
		return nil
	})
	s.fillUnits(dst[first:])
	return dst, err
}

// SetOutboxBatch records, durably, that readings from the cursor up to end
// are being sent as one batch, with a note of the sender's: after a restart
// Outbox reports them in BatchEnd and BatchNote, so that the same batch
// goes again.
func (s *Store) SetOutboxBatch(end uint64, note int64) error {
	s.outbox.write.Lock()
	defer s.outbox.write.Unlock()
	s.outbox.mu.Lock()
	cur := s.outbox.state.Cursor
	s.outbox.mu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.update(func(txn *badger.Txn) error {
		return txn.Set(appendMetaKey(nil, metaOutbox), outboxMeta(cur, cur, end, note))
	}); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if !s.noSync {
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("outbox: sync: %w", err)
		}
	}
	s.outbox.mu.Lock()
	s.outbox.state.BatchEnd, s.outbox.state.BatchNote, s.outbox.batchStart = end, note, cur
	s.outbox.mu.Unlock()
	return nil
}

func outboxMeta(cursor, batchStart, batchEnd uint64, note int64) []byte {
	v := binary.BigEndian.AppendUint64(nil, cursor)
	v = binary.BigEndian.AppendUint64(v, batchStart)
	v = binary.BigEndian.AppendUint64(v, batchEnd)
	return binary.BigEndian.AppendUint64(v, uint64(note))
}

// AdvanceOutbox moves the cursor to to, the sequence number after the
// last reading the upstream accepted (never back), and deletes the entries
// wholly behind it. It is not synced: if it is lost, the batch recorded by
// SetOutboxBatch is sent again, and a resent batch is harmless upstream.
//
// When DropOutbox moved the cursor past to while the batch was being
// sent, the readings of the batch that the upstream took after all are
// taken off the count of dropped ones.
func (s *Store) AdvanceOutbox(to uint64) error {
	s.outbox.write.Lock()
	defer s.outbox.write.Unlock()
	s.outbox.mu.Lock()
	low, end, cur, start := s.outbox.low, s.outbox.state.End, s.outbox.state.Cursor, s.outbox.batchStart
	dropped := s.outbox.dropped
	s.outbox.mu.Unlock()
	if to > end {
		return fmt.Errorf("outbox: cursor %d is past the end %d", to, end)
	}
	if to < cur {
		// Dropped while in flight: readings from the batch's start to to
		// reached the upstream.
		if to > start {
			dropped -= min(dropped, to-start)
		}
		to = cur // never back
	}
	newLow := low
	s.syncMu.Lock() // not synced, but must not come between a commit and its sync
	defer s.syncMu.Unlock()
	err := s.update(func(txn *badger.Txn) error {
		if err := txn.Set(appendMetaKey(nil, metaOutbox), outboxMeta(to, 0, 0, 0)); err != nil {
			return err
		}
		if err := txn.Set(appendMetaKey(nil, metaDropped), appendUint64(nil, dropped)); err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}})
		defer it.Close()
		budget := newTxnBudget(s.db, metaEntrySize+24)
		for it.Seek(appendOutboxKey(nil, low)); it.Valid(); it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			var n uint64
			if err := item.Value(func(v []byte) error {
				var err error
				if n, err = outboxCount(v); err != nil {
					n = s.corruptEntryEnd(seq, end) - seq // skipped by the uplink
				}
				return nil
			}); err != nil {
				return fmt.Errorf("outbox entry %d: %w", seq, err)
			}
			if seq+n > to || !budget.take(item.Key(), nil) {
				break // the rest goes with the next advance
			}
			if err := txn.Delete(item.KeyCopy(nil)); err != nil {
				return err
			}
			newLow = seq + n
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	s.outbox.mu.Lock()
	s.outbox.state.Cursor, s.outbox.state.BatchEnd, s.outbox.state.BatchNote, s.outbox.low = to, 0, 0, newLow
	s.outbox.batchStart = to
	s.outbox.dropped = dropped
	s.outbox.mu.Unlock()
	return nil
}

// OutboxDrop is what one DropOutbox removed.
type OutboxDrop struct {
	From, To           uint64 // the readings From to To-1 were dropped
	OldestTS, NewestTS int64  // their oldest and newest timestamps
}

// Readings is the number of readings dropped.
func (d OutboxDrop) Readings() uint64 { return d.To - d.From }

// DropOutbox removes unsent readings from the cursor on, whole entries
// (one group commit each), at least one and until at least n readings are
// gone or the outbox is empty, and moves the cursor past them. The
// readings are added to the count of dropped ones (DroppedUnsent) in the
// same transaction. A batch being sent meanwhile is sent all the same; see
// AdvanceOutbox.
func (s *Store) DropOutbox(n uint64) (OutboxDrop, error) {
	s.outbox.write.Lock()
	defer s.outbox.write.Unlock()
	s.outbox.mu.Lock()
	cur, end, low, dropped := s.outbox.state.Cursor, s.outbox.state.End, s.outbox.low, s.outbox.dropped
	s.outbox.mu.Unlock()
	d := OutboxDrop{From: cur, To: cur, OldestTS: math.MaxInt64, NewestTS: math.MinInt64}
	if cur == end {
		return d, nil
	}
	newLow := low
	s.syncMu.Lock() // not synced, but must not come between a commit and its sync
	defer s.syncMu.Unlock()
	err := s.update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kindOutbox)}})
		defer it.Close()
		budget := newTxnBudget(s.db, 2*(metaEntrySize+32))
		var dec outboxDecoder
		for it.Seek(appendOutboxKey(nil, low)); it.Valid() && d.To-d.From < n; it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			// Entries past the synced end stay: the uplink has not seen
			// them, and a power cut could still take them back.
			if seq >= end || !budget.take(item.Key(), nil) {
				break
			}
			err := item.Value(func(v []byte) error {
				err := dec.decode(seq, v, func(r OutboxReading) bool {
					if r.Seq >= cur {
						d.OldestTS, d.NewestTS = min(d.OldestTS, r.TS), max(d.NewestTS, r.TS)
						d.To = r.Seq + 1
					}
					return true
				})
				if err != nil { // dropped all the same, counted by its range
					d.To = max(d.To, s.corruptEntryEnd(seq, end))
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("outbox entry %d: %w", seq, err)
			}
			if err := txn.Delete(item.KeyCopy(nil)); err != nil {
				return err
			}
			newLow = d.To
		}
		if err := txn.Set(appendMetaKey(nil, metaOutbox), outboxMeta(d.To, 0, 0, 0)); err != nil {
			return err
		}
		return txn.Set(appendMetaKey(nil, metaDropped), appendUint64(nil, dropped+d.Readings()))
	})
	if err != nil {
		return OutboxDrop{}, fmt.Errorf("outbox: drop: %w", err)
	}
	s.outbox.mu.Lock()
	s.outbox.state.Cursor, s.outbox.state.BatchEnd, s.outbox.state.BatchNote, s.outbox.low = d.To, 0, 0, max(newLow, d.To)
	s.outbox.dropped = dropped + d.Readings()
	s.outbox.mu.Unlock()
	return d, nil
}

// DroppedUnsent returns the number of readings DropOutbox removed unsent,
// for the life of the data directory, less those the upstream took after
// all.
func (s *Store) DroppedUnsent() uint64 {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	return s.outbox.dropped
}
