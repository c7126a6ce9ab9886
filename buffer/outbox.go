package buffer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/cairn-gateway/cairn/buffer/encoding"
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
// then deleted. The cursor and the batch are the meta value "outbox"
// (encoding.OutboxMeta).
//
// An entry is encoded by encoding.OutboxEncoder (encoding/outbox.go
// describes its bytes): a table of the commit's series and its readings,
// compressed, a few bytes a reading.

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
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
		defer it.Close()
		if it.Seek(encoding.AppendOutboxKey(nil, seq+1)); it.Valid() {
			next = binary.BigEndian.Uint64(it.Item().Key()[1:])
		}
		return nil
	})
	return next
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
		budget.take(encoding.AppendMetaKey(nil, encoding.MetaSchema), encoding.AppendUint64(nil, encoding.SchemaVersion))
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutboxV3)}})
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
			if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaSchema), encoding.AppendUint64(nil, encoding.SchemaVersion)); err != nil {
				return err
			}
			for _, e := range batch {
				if err := txn.Set(append([]byte{byte(encoding.KindOutbox)}, e.key[1:]...), e.value); err != nil {
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
	item, err := txn.Get(encoding.AppendMetaKey(nil, encoding.MetaOutbox))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		if err := item.Value(func(v []byte) error {
			m, err := encoding.ParseOutboxMeta(v)
			if err != nil {
				return err
			}
			o.state.Cursor = m.Cursor
			if m.BatchStart == m.Cursor {
				o.state.BatchEnd, o.state.BatchNote = m.BatchEnd, m.BatchNote
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if o.dropped, err = getUint64(txn, encoding.MetaDropped); err != nil {
		return err
	}
	o.state.End, o.low, o.batchStart = o.state.Cursor, o.state.Cursor, o.state.Cursor
	defer func() { o.end = o.state.End }()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
	defer it.Close()
	it.Rewind()
	if !it.Valid() {
		return nil
	}
	o.low = min(o.low, binary.BigEndian.Uint64(it.Item().Key()[1:]))
	rit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}, Reverse: true})
	defer rit.Close()
	rit.Seek(encoding.AppendOutboxKey(nil, math.MaxUint64))
	item = rit.Item()
	first := binary.BigEndian.Uint64(item.Key()[1:])
	return item.Value(func(v []byte) error {
		n, err := encoding.OutboxCount(v)
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
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(encoding.AppendOutboxKey(nil, seq)) }); err != nil {
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
		start := encoding.AppendOutboxKey(nil, from)
		rit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}, Reverse: true})
		rit.Seek(start)
		if rit.Valid() {
			start = rit.Item().KeyCopy(nil)
		}
		rit.Close()
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}, PrefetchValues: false})
		defer it.Close()
		var dec encoding.OutboxDecoder
		had := len(dst)
		for it.Seek(start); it.Valid() && len(dst) < want; it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			n := len(dst)
			var bad error
			err := item.Value(func(v []byte) error {
				bad = dec.Decode(seq, v, func(r OutboxReading) bool {
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
		return txn.Set(encoding.AppendMetaKey(nil, encoding.MetaOutbox), encoding.AppendOutboxMeta(nil, encoding.OutboxMeta{Cursor: cur, BatchStart: cur, BatchEnd: end, BatchNote: note}))
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
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaOutbox), encoding.AppendOutboxMeta(nil, encoding.OutboxMeta{Cursor: to})); err != nil {
			return err
		}
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaDropped), encoding.AppendUint64(nil, dropped)); err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
		defer it.Close()
		budget := newTxnBudget(s.db, metaEntrySize+24)
		for it.Seek(encoding.AppendOutboxKey(nil, low)); it.Valid(); it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			var n uint64
			if err := item.Value(func(v []byte) error {
				var err error
				if n, err = encoding.OutboxCount(v); err != nil {
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
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
		defer it.Close()
		budget := newTxnBudget(s.db, 2*(metaEntrySize+32))
		var dec encoding.OutboxDecoder
		for it.Seek(encoding.AppendOutboxKey(nil, low)); it.Valid() && d.To-d.From < n; it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			// Entries past the synced end stay: the uplink has not seen
			// them, and a power cut could still take them back.
			if seq >= end || !budget.take(item.Key(), nil) {
				break
			}
			err := item.Value(func(v []byte) error {
				err := dec.Decode(seq, v, func(r OutboxReading) bool {
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
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaOutbox), encoding.AppendOutboxMeta(nil, encoding.OutboxMeta{Cursor: d.To})); err != nil {
			return err
		}
		return txn.Set(encoding.AppendMetaKey(nil, encoding.MetaDropped), encoding.AppendUint64(nil, dropped+d.Readings()))
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
