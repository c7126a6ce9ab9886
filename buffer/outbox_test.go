package buffer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// upstream returns the cursor of the test's upstream, "up": made at the
// end of the log the first time.
func upstream(t testing.TB, s *Store) *Cursor {
	t.Helper()
	return namedCursor(t, s, "up")
}

// namedCursor returns the cursor of the upstream name.
func namedCursor(t testing.TB, s *Store, name string) *Cursor {
	t.Helper()
	c, err := s.Cursor(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readOutbox returns every unsent reading of s.
func readOutbox(t *testing.T, s *Store) []OutboxReading {
	t.Helper()
	o := upstream(t, s).Outbox()
	got, err := s.ReadOutbox(o.Cursor, int(o.Pending())+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func checkOutbox(t *testing.T, got []OutboxReading, from uint64, want []Reading) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("outbox holds %d readings, want %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Seq != from+uint64(i) || r.Device != w.Device || r.Metric != w.Metric || r.TS != w.TS ||
			math.Float64bits(r.Value) != math.Float64bits(w.Value) {
			t.Fatalf("outbox reading %d: got %+v, want seq %d %+v", i, r, from+uint64(i), w)
		}
	}
}

func TestOutbox_HoldsStoredReadingsInOrderAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	upstream(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWriter(s, WriterOptions{})
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	rng := rand.New(rand.NewPCG(1, 2))
	var want []Reading
	for b := range 50 {
		var rs []Reading
		for i := range 1 + rng.IntN(600) {
			r := Reading{
				Device: []string{"a", "bridge-7", "zz"}[rng.IntN(3)],
				Metric: []string{"t", "humidity", "x.y"}[rng.IntN(3)],
				TS:     1_700_000_000_000_000_000 + int64(b*1000+i)*1e6 - int64(rng.IntN(5e9)),
				Value:  []float64{21.5, -0.0, math.Inf(1), rng.NormFloat64(), 1e300}[rng.IntN(5)],
			}
			rs = append(rs, r)
		}
		res := write(t, w, rs...)
		// What was stored already (equal readings drawn twice) is not
		// sent again.
		seen := make(map[Reading]bool)
		for _, r := range want {
			seen[r] = true
		}
		for _, r := range rs {
			if !seen[r] {
				want = append(want, r)
				seen[r] = true
			}
		}
		if res.Stored+res.Duplicates != len(rs) {
			t.Fatalf("result %+v for %d readings", res, len(rs))
		}
	}
	// A commit larger than one transaction of a 1 MiB memtable is written
	// in parts, each with its entry.
	var big []Reading
	for i := range 20000 {
		big = append(big, Reading{Device: "bulk", Metric: "m", TS: int64(i), Value: float64(i)})
	}
	write(t, w, big...)
	want = append(want, big...)

	if o := upstream(t, s).Outbox(); o.End != uint64(len(want)) || o.Cursor != 0 {
		t.Fatalf("Outbox() = %+v, want end %d cursor 0", o, len(want))
	}
	checkOutbox(t, readOutbox(t, s), 0, want)

	// A batch in flight, then part of the outbox sent.
	if err := upstream(t, s).SetOutboxBatch(700, 42); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done

	s = reopen(t, s)
	if o := upstream(t, s).Outbox(); o.End != uint64(len(want)) || o.Cursor != 0 || o.BatchEnd != 700 || o.BatchNote != 42 {
		t.Fatalf("after reopen Outbox() = %+v, want end %d, cursor 0, batch end 700, note 42", o, len(want))
	}
	if err := upstream(t, s).AdvanceOutbox(700); err != nil {
		t.Fatal(err)
	}
	if err := upstream(t, s).AdvanceOutbox(uint64(len(want)) + 1); err == nil {
		t.Fatal("AdvanceOutbox past the end: no error")
	}
	checkOutbox(t, readOutbox(t, s), 700, want[700:])
	part, err := s.ReadOutbox(1000, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkOutbox(t, part, 1000, want[1000:1010])

	s = reopen(t, s)
	defer s.Close()
	if o := upstream(t, s).Outbox(); o.Cursor != 700 || o.BatchEnd != 0 || o.End != uint64(len(want)) {
		t.Fatalf("after advance and reopen Outbox() = %+v", o)
	}
	if err := upstream(t, s).AdvanceOutbox(uint64(len(want))); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("%d outbox entries left after everything was sent", n)
	}
	if got := readOutbox(t, s); len(got) != 0 {
		t.Errorf("outbox still reads %d readings", len(got))
	}
}

// TestLog_WithoutUpstreamsGoesAtTheCheckpoint writes readings to a store
// with no upstream: they are in the log, once, until the checkpoint, which
// deletes its entries; an upstream made later starts at the log's end.
func TestLog_WithoutUpstreamsGoesAtTheCheckpoint(t *testing.T) {
	s, w := testStore(t, "")
	write(t, w, Reading{Device: "d", Metric: "m", TS: 1, Value: 1}, Reading{Device: "d", Metric: "m", TS: 2, Value: 2})
	if n := countKeys(t, s, encoding.KindOutbox); n != 1 {
		t.Errorf("%d log entries before the checkpoint, want 1", n)
	}
	if n := countKeys(t, s, encoding.KindJournal); n != 0 {
		t.Errorf("%d journal entries: the log is the journal", n)
	}
	if err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("%d log entries after the checkpoint, with no upstream", n)
	}
	if names := s.CursorNames(); len(names) != 0 {
		t.Errorf("cursors %q without upstreams", names)
	}
	if o := upstream(t, s).Outbox(); o.End != 2 || o.Cursor != 2 || o.Pending() != 0 {
		t.Errorf("a new upstream's cursor: %+v, want at the end, 2", o)
	}
}

// countKeys counts the keys of one keyspace.
func countKeys(t *testing.T, s *Store, kind encoding.KeyKind) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kind)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOutbox_CorruptEntryIsReportedAndSkipped spoils the middle one of
// three entries and the last one: reading stops before a bad entry and
// then reports its range; advancing and dropping go past it; a store whose
// newest entry is bad still opens, without it.
func TestOutbox_CorruptEntryIsReportedAndSkipped(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Store, *Writer, func()) {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		upstream(t, s)
		w := NewWriter(s, WriterOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		return s, w, func() {
			cancel()
			if err := errors.Join(<-done, s.Close()); err != nil {
				t.Error(err)
			}
		}
	}
	s, w, stop := start()
	defer func() { stop() }()
	for c := range 3 { // three commits, three entries of 10
		var rs []Reading
		for i := range 10 {
			rs = append(rs, Reading{Device: "d", Metric: "m", TS: int64(c*10+i+1) * 1e9, Value: float64(c*10 + i)})
		}
		write(t, w, rs...)
	}
	checkpoint(t, w)
	spoil := func(seq uint64) {
		t.Helper()
		if err := s.db.Update(func(txn *badger.Txn) error {
			return txn.Set(encoding.AppendOutboxKey(nil, seq), []byte{encoding.OutboxV1, 0xff, 0xff, 0xff})
		}); err != nil {
			t.Fatal(err)
		}
	}
	spoil(10)

	got, err := s.ReadOutbox(0, 25, nil)
	if err != nil || len(got) != 10 || got[9].Seq != 9 {
		t.Fatalf("read before the bad entry: %d readings, err %v; want the 10 of the first", len(got), err)
	}
	_, err = s.ReadOutbox(12, 25, nil)
	ce, ok := errors.AsType[*CorruptOutboxError](err)
	if !ok || ce.Entry != 10 || ce.From != 12 || ce.To != 20 || len(ce.Value) != 4 {
		t.Fatalf("read from inside the bad entry: %v (%+v)", err, ce)
	}
	if err := upstream(t, s).AdvanceOutbox(ce.To); err != nil {
		t.Fatalf("advance past the bad entry: %v", err)
	}
	if got := readOutbox(t, s); len(got) != 10 || got[0].Seq != 20 {
		t.Fatalf("after it: %d readings from %d, want the last entry's 10 from 20", len(got), got[0].Seq)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 1 {
		t.Errorf("%d outbox entries left, want 1", n)
	}

	// The newest entry spoilt: dropping still works, counted by its range.
	spoil(20)
	d, err := s.DropOutbox(1)
	if err != nil || d.From != 20 || d.To != 30 || s.DroppedUnsent() != 10 {
		t.Fatalf("drop of the bad newest entry: %+v, err %v, dropped %d", d, err, s.DroppedUnsent())
	}

	// A store whose newest entry is bad opens: the entry is deleted (where
	// it ends is lost with it; its reading, checkpointed at the stop, is
	// in the store), and the log goes on after the checkpoint.
	write(t, w, Reading{Device: "d", Metric: "m", TS: 100e9, Value: 1})
	spoil(30)
	stop()
	s, w, stop = start()
	if o := upstream(t, s).Outbox(); o.End != 31 || o.Cursor != 30 {
		t.Fatalf("after a restart with the newest entry bad: %+v, want the cursor at 30, the end after the checkpoint, 31", o)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("%d outbox entries left, want the bad one deleted", n)
	}
	write(t, w, Reading{Device: "d", Metric: "m", TS: 102e9, Value: 3})
	checkOutbox(t, readOutbox(t, s), 31, []Reading{{Device: "d", Metric: "m", TS: 102e9, Value: 3}})
}

// TestOutbox_MovedFromKeyspaceVersion3 opens a directory whose outbox is
// where keyspace version 3 kept it, all but three entries, as a crash in
// the middle of moving it leaves it: every unsent reading is there, in
// order, under the cursor it had, and nothing is left where it was. The
// entries are too many and too large for one transaction.
func TestOutbox_MovedFromKeyspaceVersion3(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MemTableSize: 1 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	upstream(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWriter(s, WriterOptions{})
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	var want []Reading
	rng := rand.New(rand.NewPCG(3, 4))
	for b := range 80 {
		var rs []Reading
		for i := range 500 {
			rs = append(rs, Reading{Device: fmt.Sprintf("dev-%d", i%7), Metric: "t", TS: int64(b*1000+i) * 1e6, Value: rng.NormFloat64()})
		}
		write(t, w, rs...)
		want = append(want, rs...)
	}
	// Entries of one reading, more than a transaction takes by count.
	for i := range 4000 {
		r := Reading{Device: "one", Metric: "t", TS: int64(i) * 1e6, Value: float64(i)}
		write(t, w, r)
		want = append(want, r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := upstream(t, s).AdvanceOutbox(700); err != nil {
		t.Fatal(err)
	}
	// Move all but the first three entries back, as Open would have found
	// them after a crash while it moved them.
	wb := s.db.NewWriteBatch()
	entries, size := 0, 0
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if entries++; entries <= 3 {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			size += len(v)
			if err := wb.Set(append([]byte{byte(encoding.KindOutboxV3)}, it.Item().Key()[1:]...), v); err != nil {
				return err
			}
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return wb.Set(encoding.AppendMetaKey(nil, encoding.MetaSchema), encoding.AppendUint64(nil, 3))
	})
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	if size <= 2*s.maxValue || int64(entries) < s.db.MaxBatchCount()/2 {
		t.Fatalf("%d entries, %d bytes to move: a few transactions' worth needed", entries, size)
	}

	s = reopen(t, s)
	defer s.Close()
	if o := upstream(t, s).Outbox(); o.Cursor != 700 || o.End != uint64(len(want)) {
		t.Fatalf("Outbox() = %+v, want cursor 700, end %d", o, len(want))
	}
	checkOutbox(t, readOutbox(t, s), 700, want[700:])
	if n := countKeys(t, s, encoding.KindOutboxV3); n != 0 {
		t.Errorf("%d entries left where version 3 kept them", n)
	}
	var v uint64
	s.db.View(func(txn *badger.Txn) (err error) { v, err = getUint64(txn, encoding.MetaSchema); return err })
	if v != encoding.SchemaVersion {
		t.Errorf("keyspace version recorded %d, want %d", v, encoding.SchemaVersion)
	}
}

// reopen closes s and opens its directory again with a 1 MiB memtable.
func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(Options{Dir: s.dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return again
}

// TestLog_OpensAVersion4Store opens a store as keyspace version 4 left
// it after a crash: journal entries not yet checkpointed, the same
// readings (and older, sent ones' successors) in the outbox under the one
// upstream's cursor, with a batch in flight. The journal's readings are
// stored once, the journal is gone, the checkpoint's cursor is past the
// old outbox, and the first upstream asked for takes over the cursor and
// its batch, with every unsent reading.
func TestLog_OpensAVersion4Store(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var rs []Reading
	for i := range 30 {
		rs = append(rs, Reading{Device: fmt.Sprintf("d%d", i%3), Metric: "t", TS: int64(i+1) * 1e9, Value: float64(i)})
	}
	entry := func(rs []Reading) []byte {
		var e encoding.OutboxEncoder
		for i := range rs {
			e.Add(&rs[i])
		}
		return slices.Clone(e.Value())
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		for _, kv := range []struct {
			k, v []byte
		}{
			{encoding.AppendJournalKey(nil, 7), entry(rs[:10])},
			{encoding.AppendJournalKey(nil, 8), entry(rs[10:])},
			{encoding.AppendOutboxKey(nil, 0), entry(rs[:10])},
			{encoding.AppendOutboxKey(nil, 10), entry(rs[10:])},
			{encoding.AppendMetaKey(nil, encoding.MetaOutbox), encoding.AppendOutboxMeta(nil, encoding.OutboxMeta{Cursor: 4, BatchStart: 4, BatchEnd: 12, BatchNote: 99})},
			{encoding.AppendMetaKey(nil, encoding.MetaDropped), encoding.AppendUint64(nil, 3)},
			{encoding.AppendMetaKey(nil, encoding.MetaReadings), encoding.AppendUint64(nil, 30)},
			{encoding.AppendMetaKey(nil, encoding.MetaSchema), encoding.AppendUint64(nil, 4)},
		} {
			if err := txn.Set(kv.k, kv.v); err != nil {
				return err
			}
		}
		return txn.Delete(encoding.AppendMetaKey(nil, encoding.MetaCheckpoint))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second open finds it migrated
		s, err = Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if n := countKeys(t, s, encoding.KindJournal); n != 0 {
			t.Errorf("round %d: %d journal entries left", round, n)
		}
		checkStored(t, s, rs)
		if round == 0 {
			if names := s.CursorNames(); !slices.Equal(names, []string{""}) {
				t.Errorf("cursors %q, want the older store's one", names)
			}
		}
		o := upstream(t, s).Outbox()
		if o.Cursor != 4 || o.End != 30 || o.BatchEnd != 12 || o.BatchNote != 99 || o.Dropped != 3 {
			t.Errorf("round %d: the upstream's cursor %+v, want cursor 4, end 30, batch to 12 noted 99, 3 dropped", round, o)
		}
		checkOutbox(t, readOutbox(t, s), 4, rs[4:])
		if names := s.CursorNames(); !slices.Equal(names, []string{"up"}) {
			t.Errorf("round %d: cursors %q, want the upstream's alone", round, names)
		}
		var v uint64
		s.db.View(func(txn *badger.Txn) (err error) { v, err = getUint64(txn, encoding.MetaSchema); return err })
		if v != encoding.SchemaVersion {
			t.Errorf("round %d: keyspace version %d, want %d", round, v, encoding.SchemaVersion)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLog_BadNewestEntryThenACrash opens a store, after a crash, whose
// newest log entry (not yet checkpointed) cannot be read, stores a
// reading, and crashes again: the reading, numbered where the bad entry
// began, is replayed at the next open, and the checkpoint's cursor never
// passes the end of the log.
func TestLog_BadNewestEntryThenACrash(t *testing.T) {
	dir, crashed, again := t.TempDir(), t.TempDir(), t.TempDir()
	a := []Reading{{Device: "d", Metric: "m", TS: 1e9, Value: 1}, {Device: "d", Metric: "m", TS: 2e9, Value: 2}, {Device: "d", Metric: "m", TS: 3e9, Value: 3}}
	func() {
		s, w := openWriterOpts(t, dir, holdJournal)
		defer s.Close()
		defer w.stop()
		write(t, w.Writer, a...)
		checkpoint(t, w.Writer)
		write(t, w.Writer, Reading{Device: "d", Metric: "m", TS: 4e9, Value: 4})
		if err := s.db.Update(func(txn *badger.Txn) error {
			return txn.Set(encoding.AppendOutboxKey(nil, 3), []byte{encoding.OutboxV1, 0xff, 0xff, 0xff})
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Sync(); err != nil {
			t.Fatal(err)
		}
		copyLive(t, crashed, dir)
	}()
	c := Reading{Device: "d", Metric: "m", TS: 5e9, Value: 5}
	func() {
		s, w := openWriterOpts(t, crashed, holdJournal)
		defer s.Close()
		defer w.stop()
		s.outbox.mu.Lock()
		ckpt, end := s.outbox.ckpt, s.outbox.end
		s.outbox.mu.Unlock()
		if ckpt > end {
			t.Errorf("after opening with a bad newest entry: checkpoint at %d, past the end %d", ckpt, end)
		}
		write(t, w.Writer, c)
		copyLive(t, again, crashed)
	}()
	s, err := Open(Options{Dir: again})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The reading in the bad entry is lost with it (counted all the same:
	// the count was written with it); the one stored after is not.
	checkReadings(t, s, "d", naiveQuery(append(a, c), all("d")))
}

// TestLog_OrphanedCursorsGoFirst keeps the cursor of an upstream that is
// no longer configured: its readings are kept until DropOrphaned (the
// disk cap's first step), which drops them, counted as its, and leaves
// the configured upstream's alone; the log's entries go once neither
// needs them.
func TestLog_OrphanedCursorsGoFirst(t *testing.T) {
	s, w := testStore(t, "")
	up, gone := upstream(t, s), namedCursor(t, s, "gone")
	var rs []Reading
	for i := range 20 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: int64(i+1) * 1e9, Value: float64(i)})
	}
	write(t, w, rs[:10]...)
	write(t, w, rs[10:]...)
	checkpoint(t, w)
	if n, err := s.DropOrphaned(); err != nil || n != 0 {
		t.Fatalf("before SetUpstreams: dropped %d, %v; want none (every cursor counts as configured)", n, err)
	}
	s.SetUpstreams([]string{"up"})
	if n, err := s.DropOrphaned(); err != nil || n != 20 {
		t.Fatalf("dropped %d, %v; want the orphan's 20", n, err)
	}
	if o := gone.Outbox(); o.Pending() != 0 || o.Dropped != 20 {
		t.Errorf("the orphan's cursor: %+v, want nothing pending, 20 dropped", o)
	}
	if o := up.Outbox(); o.Pending() != 20 || o.Dropped != 0 {
		t.Errorf("the configured upstream's cursor: %+v, want 20 pending, none dropped", o)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 2 {
		t.Errorf("%d log entries, want both: the configured upstream has not sent them", n)
	}
	if err := up.AdvanceOutbox(20); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("%d log entries once every cursor passed them", n)
	}
}

// copyLive copies the data directory src of an open store to dst as a
// crash would leave it: Badger may flush a memtable to a table meanwhile
// (the MANIFEST then names a file the copy's listing missed), so the copy
// is taken again until the directory's files and the MANIFEST's size are
// the same after it as before.
func copyLive(t *testing.T, dst, src string) {
	t.Helper()
	state := func() string {
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, e := range entries {
			b.WriteString(e.Name())
			if e.Name() == "MANIFEST" {
				if info, err := e.Info(); err == nil {
					fmt.Fprintf(&b, ":%d", info.Size())
				}
			}
			b.WriteByte(0)
		}
		return b.String()
	}
	for try := 0; ; try++ {
		before := state()
		err := os.CopyFS(dst, os.DirFS(src))
		if err == nil && state() == before {
			return
		}
		if try == 50 {
			t.Fatalf("copy %s: the directory kept changing (%v)", src, err)
		}
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
