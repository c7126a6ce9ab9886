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

// The log. Every group commit writes the readings it stores, in the
// order they arrived, as one entry of its transaction:
//
//	'O' firstSeq(8B BE) → log entry
//
// Its readers each hold a cursor in it: the checkpoint (journal.go), which
// writes the readings into runs and records, and every upstream, which
// sends them. An entry is deleted once every cursor has passed it, so a
// gateway without upstreams keeps an entry until the next checkpoint, and
// one whose upstream is down keeps them all until it is back (or the disk
// cap drops them, counted for each upstream that had not sent them).
//
// The log's kind sorts before every other (keyspace version 4; it was 'o'
// before). While an upstream is down it is most of the store, and new
// entries come at its end: a table that holds them with keys of other
// kinds then spans no older entry, so Badger's compactions leave the older
// ones where they are. Sorted among the other kinds, every such table
// spanned the whole log, and each compaction of one rewrote it all (a
// hundred tables at 10 M readings, mapped and built in memory at once).
//
// Stored readings are numbered from 0 in the order they were stored, for
// the life of the data directory; an entry holds readings firstSeq to
// firstSeq+count-1. An upstream reads from its cursor (the first reading
// it has not had accepted), records the batch it is about to send (so that
// a restart sends the same batch again, under the same id), and moves its
// cursor on once the upstream took it. Each upstream's cursor and batch are
// the meta value "cursor:" + its name (encoding.CursorMeta); the
// checkpoint's is "checkpoint".
//
// An entry is encoded by encoding.OutboxEncoder (encoding/outbox.go
// describes its bytes): a table of the commit's series and its readings,
// compressed, a few bytes a reading.

// OutboxState is where an upstream stands in the log.
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
	// Dropped counts the readings the disk cap (DropOutbox) or the
	// upstream's own limit (Cursor.Drop) dropped before this upstream
	// sent them, for the life of the data directory.
	Dropped uint64
	// Mark, Live, LiveBatchEnd and LiveBatchNote are the live stream
	// while the upstream catches up with its newest readings first
	// (catchup.go); all 0 otherwise.
	Mark, Live    uint64
	LiveBatchEnd  uint64
	LiveBatchNote int64
}

// Pending is the number of readings not yet sent.
func (o OutboxState) Pending() uint64 { return o.End - o.Cursor - (o.Live - o.Mark) }

// outbox is the Store's view of the log.
type outbox struct {
	// write serializes the log's own writes (the cursors' and
	// DropOutbox's) from their reading of the state to its update; held
	// before Store.syncMu and mu.
	write  sync.Mutex
	mu     sync.Mutex // guards the fields below and the cursors' state
	synced uint64     // the end of what is synced: all an upstream sees
	end    uint64     // the end of what is committed: the Writer numbers from it
	low    uint64     // no entry starts below low: where deletion resumes
	// ckpt is the checkpoint's cursor: readings before it are in runs and
	// records. hasCkpt is false for a store written before the log, until
	// Open has replayed its journal.
	ckpt    uint64
	hasCkpt bool
	// cursors are the upstreams' cursors, by name; "" is the one cursor
	// of a store of version 4 or older, until an upstream takes it over.
	cursors map[string]*Cursor
	// configured names the upstreams configured (SetUpstreams); nil: all
	// that have a cursor are.
	configured map[string]bool
	// badNewest is 1 + the sequence number of the newest entry when Open
	// could not read it (0: none), with why and its size.
	badNewest    uint64
	badNewestErr error
	badNewestLen int
}

// Cursor is one upstream's place in the log. It is what package uplink
// reads from and moves. Get it from Store.Cursor.
type Cursor struct {
	s    *Store
	name string
	wake chan struct{} // signalled after a sync that added readings
	// Guarded by the store's outbox.mu:
	state OutboxState // but End, which is the store's
	// batchStart is where the batch recorded by SetOutboxBatch starts;
	// the cursor once no batch is recorded.
	batchStart uint64
}

// hold returns the first reading that some cursor still needs: no entry
// at or after it may be deleted. Called with o.mu held.
func (o *outbox) hold() uint64 {
	h := o.ckpt
	for _, c := range o.cursors {
		h = min(h, c.state.Cursor)
	}
	return h
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

// loadOutbox reads the cursors and finds the end and the lowest entry.
func (s *Store) loadOutbox(txn *badger.Txn) error {
	o := &s.outbox
	o.cursors = make(map[string]*Cursor)
	if err := s.loadCursors(txn); err != nil {
		return err
	}
	var err error
	if o.ckpt, o.hasCkpt, err = lookupUint64(txn, encoding.MetaCheckpoint); err != nil {
		return err
	}
	o.synced = o.ckpt
	for _, c := range o.cursors {
		o.synced = max(o.synced, c.state.Cursor)
	}
	o.low = o.hold()
	defer func() { o.end = o.synced }()
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
	item := rit.Item()
	first := binary.BigEndian.Uint64(item.Key()[1:])
	return item.Value(func(v []byte) error {
		n, err := encoding.OutboxCount(v)
		if err != nil {
			// Where it ends is lost with it, and so where the next entry
			// starts: Open deletes it (dropBadNewest), and the log ends
			// where it began.
			o.badNewest, o.badNewestErr, o.badNewestLen = first+1, err, len(v)
			n = 0
		}
		o.synced = max(o.synced, first+n)
		return nil
	})
}

// loadCursors reads the upstreams' cursors, and the one cursor of a store
// of version 4 or older (as the cursor named "").
func (s *Store) loadCursors(txn *badger.Txn) error {
	o := &s.outbox
	prefix := encoding.AppendMetaKey(nil, encoding.MetaCursor)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		name := string(it.Item().Key()[len(prefix):])
		err := it.Item().Value(func(v []byte) error {
			m, err := encoding.ParseCursorMeta(v)
			if err != nil {
				return err
			}
			o.cursors[name] = s.newCursor(name, m)
			return nil
		})
		if err != nil {
			return fmt.Errorf("cursor of upstream %q: %w", name, err)
		}
	}
	var legacy encoding.CursorMeta
	found := false
	item, err := txn.Get(encoding.AppendMetaKey(nil, encoding.MetaOutbox))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		if err := item.Value(func(v []byte) error {
			legacy.OutboxMeta, err = encoding.ParseOutboxMeta(v)
			return err
		}); err != nil {
			return err
		}
		found = true
	}
	if legacy.Dropped, err = getUint64(txn, encoding.MetaDropped); err != nil {
		return err
	}
	if found || legacy.Dropped > 0 {
		o.cursors[""] = s.newCursor("", legacy)
	}
	return nil
}

// newCursor makes the cursor of the upstream name from what was stored.
func (s *Store) newCursor(name string, m encoding.CursorMeta) *Cursor {
	c := &Cursor{s: s, name: name, wake: make(chan struct{}, 1), batchStart: m.Cursor}
	c.state.Cursor, c.state.Dropped = m.Cursor, m.Dropped
	if m.BatchStart == m.Cursor {
		c.state.BatchEnd, c.state.BatchNote = m.BatchEnd, m.BatchNote
	}
	c.setLive(m)
	return c
}

// dropBadNewest deletes the newest log entry when loadOutbox could not
// read it, and says so: its readings (how many is unknown) stay in the
// store but cannot be sent.
func (s *Store) dropBadNewest() error {
	o := &s.outbox
	if o.badNewest == 0 {
		return nil
	}
	seq := o.badNewest - 1
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(encoding.AppendOutboxKey(nil, seq)) }); err != nil {
		return fmt.Errorf("delete the unreadable log entry %d: %w", seq, err)
	}
	s.log.Error("the newest log entry cannot be read: deleted it; its readings stay in the store but are not sent upstream",
		"entry", seq, "bytes", o.badNewestLen, "err", o.badNewestErr)
	o.badNewest = 0
	// A batch recorded across it ends where it began.
	for _, c := range o.cursors {
		c.state.BatchEnd = min(c.state.BatchEnd, o.synced)
	}
	return nil
}

// Cursor returns the cursor of the upstream name, making it if the store
// has none: at the end of the log (the upstream gets the readings stored
// from now on), or, for the first upstream a store of version 4 or older
// is asked for, where that store's one upstream stood. A new cursor is
// recorded, and synced, before Cursor returns.
func (s *Store) Cursor(name string) (*Cursor, error) {
	if name == "" {
		return nil, errors.New("log: an upstream's cursor needs a name")
	}
	o := &s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	c, ok := o.cursors[name]
	legacy := o.cursors[""]
	m := encoding.CursorMeta{OutboxMeta: encoding.OutboxMeta{Cursor: o.synced, BatchStart: o.synced}}
	if legacy != nil {
		m = legacy.meta()
	}
	o.mu.Unlock()
	if ok {
		return c, nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	err := s.update(func(txn *badger.Txn) error {
		if legacy != nil {
			for _, k := range []string{encoding.MetaOutbox, encoding.MetaDropped} {
				if err := txn.Delete(encoding.AppendMetaKey(nil, k)); err != nil {
					return err
				}
			}
		}
		return txn.Set(cursorKey(name), encoding.AppendCursorMeta(nil, m))
	})
	if err == nil && !s.noSync {
		err = s.db.Sync()
	}
	if err != nil {
		return nil, fmt.Errorf("log: cursor of upstream %q: %w", name, err)
	}
	c = s.newCursor(name, m)
	o.mu.Lock()
	if legacy != nil {
		delete(o.cursors, "")
		// What the older store's upstream was doing goes on.
		c.state, c.batchStart = legacy.state, legacy.batchStart
	}
	o.cursors[name] = c
	o.mu.Unlock()
	if legacy != nil {
		s.log.Info("the upstream takes over the log's cursor of the store's one upstream", "upstream", name, "pending", o.synced-c.state.Cursor)
	}
	return c, nil
}

// SetUpstreams names the upstreams that are configured. The cursors of
// others are orphans: nothing sends their readings, and the disk cap drops
// those before any reading (DropOrphaned).
func (s *Store) SetUpstreams(names []string) {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	s.outbox.configured = make(map[string]bool, len(names))
	for _, n := range names {
		s.outbox.configured[n] = true
	}
}

// DropOrphaned drops the unsent readings of every upstream that has a
// cursor but is not configured (SetUpstreams), counted and logged as each
// such cursor's, and returns how many went. Their log entries go once no
// other cursor needs them.
func (s *Store) DropOrphaned() (uint64, error) {
	s.outbox.mu.Lock()
	var orphans []*Cursor
	for name, c := range s.outbox.cursors {
		if s.outbox.configured != nil && !s.outbox.configured[name] && c.state.Cursor < s.outbox.synced {
			orphans = append(orphans, c)
		}
	}
	s.outbox.mu.Unlock()
	var n uint64
	for _, c := range orphans {
		d, err := c.drop(math.MaxUint64, nil, "reason", "the upstream is not configured")
		if err != nil {
			return n, err
		}
		n += d.Readings()
	}
	return n, nil
}

// CursorNames returns the names of the upstreams with a cursor in the log,
// sorted, "" for that of a store of version 4 or older not yet taken over.
func (s *Store) CursorNames() []string {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	names := make([]string, 0, len(s.outbox.cursors))
	for n := range s.outbox.cursors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CursorState returns where the upstream name stands, and whether it has
// a cursor.
func (s *Store) CursorState(name string) (OutboxState, bool) {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	c, ok := s.outbox.cursors[name]
	if !ok {
		return OutboxState{}, false
	}
	st := c.state
	st.End = s.outbox.synced
	return st, true
}

// cursorKey is the meta key of the cursor of the upstream name.
func cursorKey(name string) []byte {
	return encoding.AppendMetaKey(nil, encoding.MetaCursor+name)
}

// meta is what is stored of c (outbox.mu held).
func (c *Cursor) meta() encoding.CursorMeta {
	return encoding.CursorMeta{
		OutboxMeta: encoding.OutboxMeta{Cursor: c.state.Cursor, BatchStart: c.batchStart, BatchEnd: c.state.BatchEnd, BatchNote: c.state.BatchNote},
		Dropped:    c.state.Dropped,
		Mark:       c.state.Mark, Live: c.state.Live, LiveBatchEnd: c.state.LiveBatchEnd, LiveBatchNote: c.state.LiveBatchNote,
	}
}

// setMeta writes c's stored value, or, for the cursor of a store of
// version 4 or older, its two.
func (c *Cursor) setMeta(txn *badger.Txn, m encoding.CursorMeta) error {
	if c.name != "" {
		return txn.Set(cursorKey(c.name), encoding.AppendCursorMeta(nil, m))
	}
	if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaOutbox), encoding.AppendOutboxMeta(nil, m.OutboxMeta)); err != nil {
		return err
	}
	return txn.Set(encoding.AppendMetaKey(nil, encoding.MetaDropped), encoding.AppendUint64(nil, m.Dropped))
}

// Name is the upstream's name.
func (c *Cursor) Name() string { return c.name }

// Outbox returns where the upstream stands.
func (c *Cursor) Outbox() OutboxState {
	c.s.outbox.mu.Lock()
	defer c.s.outbox.mu.Unlock()
	st := c.state
	st.End = c.s.outbox.synced
	return st
}

// OutboxWake is signalled after a group commit adds readings to the
// log. It holds one signal at most: check Outbox after each.
func (c *Cursor) OutboxWake() <-chan struct{} { return c.wake }

// ReadOutbox is Store.ReadOutbox.
func (c *Cursor) ReadOutbox(from uint64, max int, dst []OutboxReading) ([]OutboxReading, error) {
	return c.s.ReadOutbox(from, max, dst)
}

// LogPending is the number of readings that some upstream has not sent:
// from the cursor furthest behind to the end.
func (s *Store) LogPending() uint64 {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	var p uint64
	for _, c := range o.cursors {
		p = max(p, o.synced-c.state.Cursor)
	}
	return p
}

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

// outboxSynced shows the upstreams what the last sync made durable: none
// ever sends a reading that a power cut could still take back (and whose
// number a later reading would then get).
func (s *Store) outboxSynced() {
	o := &s.outbox
	o.mu.Lock()
	grew := o.end > o.synced
	o.synced = o.end
	o.mu.Unlock()
	if !grew {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.cursors {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// ReadOutbox appends to dst the readings from sequence number from on, at
// most max of them, in the order they were stored. Each one's Unit is the
// unit its series has when it is read ("" when its series has none, or
// is no longer in the index): a unit belongs to a series, not to a
// reading, and the log does not keep it (unit.go).
func (s *Store) ReadOutbox(from uint64, max int, dst []OutboxReading) ([]OutboxReading, error) {
	if max <= 0 {
		return dst, nil
	}
	want := len(dst) + max
	first := len(dst)
	s.outbox.mu.Lock()
	synced := s.outbox.synced
	s.outbox.mu.Unlock()
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
			if seq >= synced {
				break // committed, not yet synced: a power cut could take it back
			}
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
				return fmt.Errorf("log entry %d: %w", seq, err)
			}
			if bad != nil {
				// What the entry gave before it failed is not trusted; the
				// readings before it go now, the entry is reported next.
				dst = dst[:n]
				if ce, ok := bad.(*CorruptOutboxError); ok {
					ce.To = s.corruptEntryEnd(seq, synced)
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
func (c *Cursor) SetOutboxBatch(end uint64, note int64) error {
	s, o := c.s, &c.s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	m := c.meta()
	o.mu.Unlock()
	m.BatchStart, m.BatchEnd, m.BatchNote = m.Cursor, end, note
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.update(func(txn *badger.Txn) error { return c.setMeta(txn, m) }); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if !s.noSync {
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("log: sync: %w", err)
		}
	}
	o.mu.Lock()
	c.state.BatchEnd, c.state.BatchNote, c.batchStart = end, note, m.Cursor
	o.mu.Unlock()
	return nil
}

// AdvanceOutbox moves the cursor to to, the sequence number after the
// last reading the upstream accepted (never back), and deletes the entries
// that no cursor needs any more. It is not synced: if it is lost, the
// batch recorded by SetOutboxBatch is sent again, and a resent batch is
// harmless upstream.
//
// When DropOutbox moved the cursor past to while the batch was being
// sent, the readings of the batch that the upstream took after all are
// taken off the count of dropped ones.
func (c *Cursor) AdvanceOutbox(to uint64) error {
	s, o := c.s, &c.s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	end, cur, start := o.synced, c.state.Cursor, c.batchStart
	m := c.meta()
	o.mu.Unlock()
	if to > end {
		return fmt.Errorf("log: cursor %d is past the end %d", to, end)
	}
	if to < cur {
		// Dropped while in flight: readings from the batch's start to to
		// reached the upstream.
		if to > start {
			m.Dropped -= min(m.Dropped, to-start)
		}
		to = cur // never back
	}
	m.OutboxMeta = encoding.OutboxMeta{Cursor: to, BatchStart: to}
	m = merged(m)
	to = m.Cursor
	s.syncMu.Lock() // not synced, but must not come between a commit and its sync
	defer s.syncMu.Unlock()
	var low uint64
	err := s.update(func(txn *badger.Txn) error {
		if err := c.setMeta(txn, m); err != nil {
			return err
		}
		o.mu.Lock()
		hold := min(to, o.ckpt)
		for _, other := range o.cursors {
			if other != c {
				hold = min(hold, other.state.Cursor)
			}
		}
		o.mu.Unlock()
		budget := newTxnBudget(s.db, metaEntrySize+48)
		var err error
		low, err = s.trimLog(txn, &budget, hold)
		return err
	})
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	o.mu.Lock()
	c.state.Cursor, c.state.BatchEnd, c.state.BatchNote, c.state.Dropped = to, m.BatchEnd, m.BatchNote, m.Dropped
	c.batchStart = m.BatchStart
	c.setLive(m)
	o.low = max(o.low, low)
	o.mu.Unlock()
	return nil
}

// trimLogBehind deletes the entries that every reader has passed, in
// transactions of their own, not synced.
func (s *Store) trimLogBehind() error {
	o := &s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	s.syncMu.Lock() // not synced, but must not come between a commit and its sync
	defer s.syncMu.Unlock()
	for {
		o.mu.Lock()
		hold, low := o.hold(), o.low
		o.mu.Unlock()
		if low >= hold {
			return nil
		}
		var next uint64
		err := s.update(func(txn *badger.Txn) error {
			budget := newTxnBudget(s.db, 0)
			var err error
			next, err = s.trimLog(txn, &budget, hold)
			return err
		})
		if err != nil {
			return err
		}
		o.mu.Lock()
		o.low = max(o.low, next)
		o.mu.Unlock()
		if next <= low {
			return nil
		}
	}
}

// trimLog deletes, in txn, the entries from the lowest on that end at or
// before hold, as far as budget allows, and returns where the first entry
// it left starts (or hold).
func (s *Store) trimLog(txn *badger.Txn, budget *txnBudget, hold uint64) (uint64, error) {
	o := &s.outbox
	o.mu.Lock()
	low, end := o.low, o.synced
	o.mu.Unlock()
	if low >= hold {
		return low, nil
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
	defer it.Close()
	for it.Seek(encoding.AppendOutboxKey(nil, low)); it.Valid(); it.Next() {
		item := it.Item()
		seq := binary.BigEndian.Uint64(item.Key()[1:])
		if seq >= hold {
			return hold, nil
		}
		var n uint64
		if err := item.Value(func(v []byte) error {
			var err error
			if n, err = encoding.OutboxCount(v); err != nil {
				n = s.corruptEntryEnd(seq, end) - seq // skipped by the uplink
			}
			return nil
		}); err != nil {
			return low, fmt.Errorf("log entry %d: %w", seq, err)
		}
		if seq+n > hold || !budget.take(item.Key(), nil) {
			return seq, nil // the rest goes with the next advance
		}
		if err := txn.Delete(item.KeyCopy(nil)); err != nil {
			return low, err
		}
		low = seq + n
	}
	return hold, nil
}

// OutboxDrop is what one DropOutbox removed.
type OutboxDrop struct {
	From, To           uint64 // the readings From to To-1 were dropped
	OldestTS, NewestTS int64  // their oldest and newest timestamps
}

// Readings is the number of readings dropped.
func (d OutboxDrop) Readings() uint64 { return d.To - d.From }

// DropOutbox removes the oldest readings of the log that some upstream has
// not sent, whole entries (one group commit each), at least one and until
// at least n readings are gone or none is left, and moves every cursor
// that had not passed them past them. Each upstream counts the readings
// it had not sent (OutboxState.Dropped) in the same transaction. A batch
// being sent meanwhile is sent all the same; see AdvanceOutbox. Entries
// the checkpoint has not passed stay: their readings are not in runs yet.
func (s *Store) DropOutbox(n uint64) (OutboxDrop, error) {
	o := &s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	from, end, low := o.hold(), min(o.synced, o.ckpt), o.low
	if len(o.cursors) == 0 {
		from = end // nothing unsent
	}
	o.mu.Unlock()
	d := OutboxDrop{From: from, To: from, OldestTS: math.MaxInt64, NewestTS: math.MinInt64}
	if from >= end {
		return d, nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	var metas map[*Cursor]encoding.CursorMeta
	err := s.update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
		defer it.Close()
		o.mu.Lock()
		budget := newTxnBudget(s.db, int64(len(o.cursors)+1)*(metaEntrySize+48))
		o.mu.Unlock()
		var dec encoding.OutboxDecoder
		for it.Seek(encoding.AppendOutboxKey(nil, low)); it.Valid() && d.To-d.From < n; it.Next() {
			item := it.Item()
			seq := binary.BigEndian.Uint64(item.Key()[1:])
			if seq >= end || !budget.take(item.Key(), nil) {
				break
			}
			err := item.Value(func(v []byte) error {
				err := dec.Decode(seq, v, func(r OutboxReading) bool {
					if r.Seq >= from && r.Seq < end {
						d.OldestTS, d.NewestTS = min(d.OldestTS, r.TS), max(d.NewestTS, r.TS)
						d.To = r.Seq + 1
					}
					return true
				})
				if err != nil { // dropped all the same, counted by its range
					d.To = max(d.To, min(s.corruptEntryEnd(seq, end), end))
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("log entry %d: %w", seq, err)
			}
			if err := txn.Delete(item.KeyCopy(nil)); err != nil {
				return err
			}
		}
		metas = make(map[*Cursor]encoding.CursorMeta)
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, c := range o.cursors {
			if c.state.Cursor >= d.To {
				continue
			}
			m := c.droppedTo(d.To)
			if err := c.setMeta(txn, m); err != nil {
				return err
			}
			metas[c] = m
		}
		return nil
	})
	// Synced: a cursor that a power cut moved back would find its
	// readings gone, uncounted.
	if err == nil && !s.noSync {
		err = s.db.Sync()
	}
	if err != nil {
		return OutboxDrop{}, fmt.Errorf("log: drop: %w", err)
	}
	o.mu.Lock()
	for c, m := range metas {
		// batchStart stays: AdvanceOutbox takes what the batch in flight
		// delivers after all off the count.
		c.dropped(m)
	}
	o.low = max(o.low, d.To)
	o.mu.Unlock()
	return d, nil
}

// DroppedUnsent returns the number of readings DropOutbox removed before
// some upstream sent them, for the life of the data directory, less those
// an upstream took after all: of each reading, the upstreams that had not
// sent it count once each.
func (s *Store) DroppedUnsent() uint64 {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	var n uint64
	for _, c := range s.outbox.cursors {
		n += c.state.Dropped
	}
	return n
}
