package buffer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// holdJournal keeps readings in the journal until something checkpoints.
var holdJournal = WriterOptions{CheckpointInterval: time.Hour, SealCheck: 24 * time.Hour, BucketSamples: 10}

// journalReadings returns readings of three series over two UTC days, the
// second day's late, as several commits would bring them.
func journalReadings() [][]Reading {
	base := int64(1763769600) * 1e9
	var commits [][]Reading
	for c := range 6 {
		var rs []Reading
		for i := range 7 {
			ts := base + int64(c*7+i)*1e9
			rs = append(rs,
				Reading{Device: "kitchen", Metric: "t", TS: ts, Value: 20 + float64(i)/4},
				Reading{Device: "kitchen", Metric: "h", TS: ts, Value: float64(40 + c)},
				Reading{Device: "garage", Metric: "t", TS: ts - day, Value: float64(-i)})
		}
		commits = append(commits, rs)
	}
	return commits
}

// checkStored checks that s holds exactly want: readings, count and
// aggregates.
func checkStored(t *testing.T, s *Store, want []Reading) {
	t.Helper()
	byDevice := map[string][]Reading{}
	sums := map[[2]string]aggregate.Stats{}
	for _, r := range want {
		byDevice[r.Device] = append(byDevice[r.Device], r)
		k := [2]string{r.Device, r.Metric}
		st := sums[k]
		st.Add(r.Value)
		sums[k] = st
	}
	for d, rs := range byDevice {
		checkReadings(t, s, d, naiveQuery(rs, all(d)))
	}
	if n := s.ReadingCount(); n != uint64(len(want)) {
		t.Errorf("reading count: got %d, want %d", n, len(want))
	}
	for k, w := range sums {
		got, _, err := s.StatsCover(k[0], k[1], math.MinInt64/2, math.MaxInt64/2)
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != w.Count || got.Sum != w.Sum || got.Min != w.Min || got.Max != w.Max {
			t.Errorf("stats of %s/%s: got %+v, want %+v", k[0], k[1], got, w)
		}
	}
}

// TestJournal_CommitsWriteOneEntryAndQueriesSeeThem checks that commits
// write only journal entries, that queries see their readings and
// aggregates there without a checkpoint, and that the checkpoint then
// writes one run per series-day and empties the journal.
func TestJournal_CommitsWriteOneEntryAndQueriesSeeThem(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{CheckpointInterval: time.Hour, SealCheck: 24 * time.Hour, BucketSamples: 1000})
	var want []Reading
	for _, rs := range journalReadings() {
		if res := write(t, w, rs...); res.Stored != len(rs) {
			t.Fatalf("stored %d of %d", res.Stored, len(rs))
		}
		want = append(want, rs...)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 6 {
		t.Errorf("journal entries: got %d, want one per commit, 6", n)
	}
	if n := countKeys(t, s, encoding.KindPoint) + countKeys(t, s, encoding.KindMinute); n != 0 {
		t.Errorf("runs and minute records before a checkpoint: got %d, want none", n)
	}
	before := w.Stats().Checkpoints
	checkStored(t, s, want)
	if n := w.Stats().Checkpoints; n != before {
		t.Errorf("the queries checkpointed the journal (%d checkpoints, %d before)", n, before)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n != 6 {
		t.Errorf("journal entries after the queries: got %d, want 6", n)
	}
	if err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, want)
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("journal entries after a checkpoint: got %d, want none", n)
	}
	if n := countKeys(t, s, encoding.KindPoint); n != 3 {
		t.Errorf("runs: got %d, want one per series-day, 3", n)
	}
	// The journal's readings are known to the duplicate check, and so are
	// the runs a checkpoint wrote.
	all := journalReadings()
	if res := write(t, w, all[5]...); res.Duplicates != len(all[5]) {
		t.Errorf("the last commit again: %d duplicates, want %d", res.Duplicates, len(all[5]))
	}
}

// TestJournal_ReplayedAfterACrash copies the data directory while the
// journal holds every reading, as a power cut would leave it right after a
// commit's sync, and opens the copy: the readings, their count and their
// aggregates are all there, once, and the journal is empty.
func TestJournal_ReplayedAfterACrash(t *testing.T) {
	dir := t.TempDir()
	crashed := t.TempDir()
	var want []Reading
	func() {
		s, w := openWriterOpts(t, dir, holdJournal)
		defer s.Close()
		defer w.stop()
		commits := journalReadings()
		for _, rs := range commits[:2] {
			write(t, w.Writer, rs...)
			want = append(want, rs...)
		}
		checkpoint(t, w.Writer) // the kitchen's first 10 readings of t sealed, the rest runs
		for _, rs := range commits[2:] {
			write(t, w.Writer, rs...)
			want = append(want, rs...)
		}
		write(t, w.Writer, commits[3]...) // duplicates: not in the journal
		if n := countKeys(t, s, encoding.KindOutbox); n != 4 {
			t.Fatalf("journal entries: got %d, want 4", n)
		}
		// The Writer is idle: every commit is synced, the copy is what a
		// power cut would leave.
		copyLive(t, crashed, dir)
	}()
	s, w := testStoreWith(t, crashed, holdJournal)
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("journal entries after Open: got %d, want none", n)
	}
	checkStored(t, s, want)
	res := write(t, w, want...)
	if res.Duplicates != len(want) {
		t.Errorf("everything again after the crash: %d duplicates of %d", res.Duplicates, len(want))
	}
	checkpoint(t, w)
	if got := checkBuckets(t, s, 10); got != 3*10 {
		t.Errorf("sealed %d readings, want the bucket of each series sealed before the crash", got)
	}
	checkStored(t, s, want)
	// New readings of each series: the next checkpoint seals the full
	// buckets of the replayed readings too.
	var more []Reading
	for _, r := range want[len(want)-3:] {
		for i := range 10 {
			more = append(more, Reading{Device: r.Device, Metric: r.Metric, TS: r.TS + int64(i+1)*1e6, Value: float64(i)})
		}
	}
	write(t, w, more...)
	want = append(want, more...)
	checkpoint(t, w)
	if got := checkBuckets(t, s, 10); got != 3*50 {
		t.Errorf("sealed %d readings after new ones, want 5 buckets of each series", got)
	}
	checkStored(t, s, want)
}

// TestJournal_ReplaySplitsWhatASmallerMemtableCannotTake opens, with a 1
// MiB memtable, a journal entry written with a 16 MiB one: its runs and
// records do not fit one transaction of the smaller memtable, and the
// replay writes them in parts.
func TestJournal_ReplaySplitsWhatASmallerMemtableCannotTake(t *testing.T) {
	dir, crashed := t.TempDir(), t.TempDir()
	base := int64(1763769600) * 1e9
	var want []Reading
	for i := range 3000 {
		want = append(want, Reading{Device: fmt.Sprintf("dev-%04d", i), Metric: "t", TS: base + int64(i)*1e6, Value: float64(i)})
	}
	func() {
		s, err := Open(Options{Dir: dir, MemTableSize: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		tw := &testWriter{Writer: NewWriter(s, holdJournal), cancel: cancel, done: make(chan error)}
		go func() { tw.done <- tw.Run(ctx) }()
		defer tw.stop()
		write(t, tw.Writer, want...)
		if n := countKeys(t, s, encoding.KindOutbox); n != 1 {
			t.Fatalf("journal entries: got %d, want 1", n)
		}
		copyLive(t, crashed, dir)
	}()
	s, _ := testStoreOpts(t, Options{Dir: crashed, MemTableSize: 1 << 20}, holdJournal)
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Errorf("journal entries after Open: got %d, want none", n)
	}
	checkStored(t, s, want)
}

// TestJournal_RollUpWaitsForTheJournal stores, in one commit, more readings
// of an hour than a checkpoint of a 1 MiB memtable takes, then one of the
// next hour: the commit checkpoints in its middle, and what follows stays
// in the journal. The hour's record, rolled up once the journal is empty,
// counts every reading of the hour.
func TestJournal_RollUpWaitsForTheJournal(t *testing.T) {
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20}, WriterOptions{CheckpointInterval: time.Hour, SealCheck: 24 * time.Hour})
	hour := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	var want aggregate.Stats
	for i := range 20000 {
		r := Reading{Device: "d", Metric: "m", TS: hour + int64(i)*int64(time.Hour)/20000, Value: float64(i % 100)}
		rs = append(rs, r)
		want.Add(r.Value)
	}
	rs = append(rs, Reading{Device: "d", Metric: "m", TS: hour + int64(time.Hour), Value: 1})
	write(t, w, rs...)
	if w.Stats().Checkpoints == 0 {
		t.Fatal("no checkpoint in the middle of the commit: the test needs one")
	}
	checkpoint(t, w)
	groups, _, err := s.StatsByLevel("d", "m", aggregate.Hour, hour, hour+int64(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Stats.Count != want.Count || groups[0].Stats.Sum != want.Sum {
		t.Errorf("hour record: got %+v, want count %d, sum %g", groups, want.Count, want.Sum)
	}
	if rolled := s.rolled("d", "m"); rolled.cut(aggregate.Hour) <= hour {
		t.Errorf("hour not rolled up (rolled to %d)", rolled.cut(aggregate.Hour))
	}
}

// TestJournal_ReadingSpanSeesTheJournal checks that the span the status
// shows, and the oldest reading, count readings still in the journal,
// without a checkpoint: first with nothing else stored, then with older
// readings stored and a late one, older still, in the journal.
func TestJournal_ReadingSpanSeesTheJournal(t *testing.T) {
	s, w := testStoreWith(t, "", holdJournal)
	commits := journalReadings()
	write(t, w, commits[0]...)
	before := w.Stats().Checkpoints
	defer func() {
		if n := w.Stats().Checkpoints; n != before {
			t.Errorf("reading the span checkpointed the journal (%d checkpoints, %d before)", n, before)
		}
	}()
	oldest, newest, ok, err := s.ReadingSpan()
	if err != nil || !ok {
		t.Fatalf("span: ok %v, %v; want the readings of the journal", ok, err)
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range commits[0] {
		lo, hi = min(lo, r.TS), max(hi, r.TS)
	}
	if oldest != lo || newest != hi {
		t.Errorf("span: %d..%d, want %d..%d", oldest, newest, lo, hi)
	}
	if got, ok, err := s.OldestReading(); err != nil || !ok || got != lo {
		t.Errorf("oldest reading: %d, %v, %v; want %d", got, ok, err, lo)
	}

	// Checkpointed, then a late reading, older than any, in the journal,
	// and the oldest reading to be sought again, as after a prune (which
	// would checkpoint first).
	checkpoint(t, w)
	before = w.Stats().Checkpoints
	late := Reading{Device: "garage", Metric: "t", TS: lo - 3*day, Value: 7}
	write(t, w, late)
	s.mu.Lock()
	s.oldestValid = false
	s.mu.Unlock()
	if oldest, _, ok, err := s.ReadingSpan(); err != nil || !ok || oldest != late.TS {
		t.Errorf("span after a late reading: from %d, %v, %v; want %d", oldest, ok, err, late.TS)
	}
	if got, ok, err := s.OldestReading(); err != nil || !ok || got != late.TS {
		t.Errorf("oldest reading after a late one and a prune: %d, %v, %v; want %d", got, ok, err, late.TS)
	}
}

// TestJournal_EntriesFitATableBlock stores a commit far larger than a
// log entry may be: none is larger than a block of Badger's tables, and
// the log has several.
func TestJournal_EntriesFitATableBlock(t *testing.T) {
	// Each part of the commit but the last is checkpointed when the next
	// begins; the upstream's cursor keeps them all in the log.
	s, w := testStoreOpts(t, Options{MemTableSize: 64 << 20}, holdJournal)
	upstream(t, s)
	rng := rand.New(rand.NewPCG(5, 6))
	var rs []Reading
	for i := range 20000 {
		rs = append(rs, Reading{Device: fmt.Sprintf("dev-%03d", i%300), Metric: "t", TS: int64(i) * 1e6, Value: float64(rng.IntN(1 << 40))})
	}
	write(t, w, rs...)
	if n := countKeys(t, s, encoding.KindJournal); n != 0 {
		t.Errorf("%d journal entries: the log is the journal", n)
	}
	for _, kind := range []encoding.KeyKind{encoding.KindOutbox} {
		entries, largest := 0, 0
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kind)}})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				entries++
				largest = max(largest, int(it.Item().ValueSize()))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if (kind == encoding.KindOutbox && entries < 2) || largest >= tableBlockSize {
			t.Errorf("%c: %d entries, the largest %d bytes; want each within a %d-byte block, and several in the outbox", kind, entries, largest, tableBlockSize)
		}
	}
	checkpoint(t, w)
	checkStored(t, s, rs)
}
