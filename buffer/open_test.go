package buffer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// unsealed keeps every reading open.
var unsealed = WriterOptions{BucketSamples: MaxBucketSamples, SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour}

func TestRuns_ACheckpointWritesOneKeyPerSeriesDay(t *testing.T) {
	dir := t.TempDir()
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 50 { // out of order within the commit
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64((i*7)%50)*1e9, Value: float64(i) / 10})
	}
	for i := range 3 { // late: the day before
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base - day + int64(i)*1e9, Value: 1})
	}
	rs = append(rs, Reading{Device: "d", Metric: "n", TS: base, Value: 2})
	check := func(s *Store) {
		t.Helper()
		if n := countKeys(t, s, encoding.KindPoint); n != 3 {
			t.Errorf("point keys: got %d, want 3 (one per series-day)", n)
		}
		if n := countPoints(t, s); n != len(rs) {
			t.Errorf("open readings: got %d, want %d", n, len(rs))
		}
		for _, desc := range []bool{false, true} {
			q := all("d")
			q.Desc = desc
			got, err := s.Readings(q)
			if err != nil {
				t.Fatal(err)
			}
			if err := sameReadings(got, naiveQuery(rs, q)); err != nil {
				t.Errorf("desc %v: %v", desc, err)
			}
		}
	}
	func() {
		s, w := openWriterOpts(t, dir, unsealed)
		defer s.Close()
		defer w.stop()
		if res := write(t, w.Writer, rs...); res.Stored != len(rs) {
			t.Fatalf("stored %d, want %d", res.Stored, len(rs))
		}
		checkpoint(t, w.Writer)
		check(s)
	}()
	s, w := testStoreWith(t, dir, unsealed)
	check(s)
	if res := write(t, w, rs...); res.Duplicates != len(rs) {
		t.Errorf("the same readings again after a restart: %d duplicates, want %d", res.Duplicates, len(rs))
	}
}

// TestRuns_OverlappingRunsMatchReference writes random readings of two
// series in many small commits, out of order and with repeats, so that
// runs overlap in time: queries must merge them in order, duplicates must
// be found among them, before and after a restart.
func TestRuns_OverlappingRunsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	base := int64(1763769600) * 1e9
	var ref, sent []Reading
	seen := map[Reading]bool{}
	for range 400 {
		r := Reading{Device: "d", Metric: []string{"a", "b"}[rng.IntN(2)],
			TS: base + int64(rng.IntN(2*86400))*1e9/4, Value: float64(rng.IntN(5))}
		if rng.IntN(10) == 0 && len(sent) > 0 {
			r = sent[rng.IntN(len(sent))] // a repeat
		}
		sent = append(sent, r)
		if !seen[r] {
			seen[r] = true
			ref = append(ref, r)
		}
	}
	query := func(s *Store) {
		t.Helper()
		checkRandomQueries(t, rng, s, ref, "d", []string{"a", "b"}, 200, 500)
	}
	func() {
		s, w := openWriterOpts(t, dir, unsealed)
		defer s.Close()
		defer w.stop()
		stored, dups := 0, 0
		for i := 0; i < len(sent); i += 1 + i%17 {
			res := write(t, w.Writer, sent[i:min(i+1+i%17, len(sent))]...)
			stored += res.Stored
			dups += res.Duplicates
		}
		if stored != len(ref) || dups != len(sent)-len(ref) {
			t.Fatalf("stored %d and %d duplicates, want %d and %d", stored, dups, len(ref), len(sent)-len(ref))
		}
		query(s)
	}()
	s, w := testStoreWith(t, dir, unsealed)
	query(s)
	if res := write(t, w, ref...); res.Duplicates != len(ref) {
		t.Errorf("every reading again after a restart: %d duplicates, want %d", res.Duplicates, len(ref))
	}
	if n := s.ReadingCount(); n != uint64(len(ref)) {
		t.Errorf("reading count: got %d, want %d", n, len(ref))
	}
}

func TestRuns_SealWritesTheRestOfARunAgain(t *testing.T) {
	s, w := testStoreWith(t, "", sealOpts) // buckets of 10
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 30 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i) / 10})
	}
	write(t, w, rs[:25]...)
	checkpoint(t, w) // one run; two buckets sealed from it
	if n := checkBuckets(t, s, 10); n != 20 {
		t.Errorf("sealed %d readings, want 20", n)
	}
	if k, n := countKeys(t, s, encoding.KindPoint), countPoints(t, s); k != 1 || n != 5 {
		t.Errorf("open: %d readings in %d runs, want 5 in 1", n, k)
	}
	write(t, w, rs[25:]...)
	checkpoint(t, w) // a second run fills the third bucket
	if n := checkBuckets(t, s, 10); n != 30 {
		t.Errorf("sealed %d readings, want 30", n)
	}
	if k := countKeys(t, s, encoding.KindPoint); k != 0 {
		t.Errorf("%d runs left open, want none", k)
	}
	checkReadings(t, s, "d", rs)
}

func TestRuns_PruneWritesTheRestOfARunAgain(t *testing.T) {
	dir := t.TempDir()
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 25 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i)})
	}
	opts := unsealed
	opts.Retention.RawMaxReadingsPerSeries = 10
	check := func(s *Store) {
		t.Helper()
		checkReadings(t, s, "d", rs[15:])
		if n := s.ReadingCount(); n != 10 {
			t.Errorf("reading count: got %d, want 10", n)
		}
		if k, n := countKeys(t, s, encoding.KindPoint), countPoints(t, s); k != 1 || n != 10 {
			t.Errorf("open: %d readings in %d runs, want 10 in 1", n, k)
		}
	}
	func() {
		s, w := openWriterOpts(t, dir, opts)
		defer s.Close()
		defer w.stop()
		write(t, w.Writer, rs...)
		if err := w.Prune(context.Background(), time.Unix(0, base+day)); err != nil {
			t.Fatal(err)
		}
		check(s)
	}()
	s, _ := testStoreWith(t, dir, opts)
	check(s)
}

func TestStore_RecordsKeyspaceVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var v uint64
	if err := s.db.View(func(txn *badger.Txn) (err error) { v, err = getUint64(txn, encoding.MetaSchema); return err }); err != nil {
		t.Fatal(err)
	}
	if v != encoding.SchemaVersion {
		t.Errorf("recorded keyspace version %d, want %d", v, encoding.SchemaVersion)
	}
	// As a later cairn would leave it.
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(encoding.AppendMetaKey(nil, encoding.MetaSchema), encoding.AppendUint64(nil, encoding.SchemaVersion+1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	if want := fmt.Sprintf("keyspace version %d", encoding.SchemaVersion+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("opening a newer keyspace: got %v, want an error naming version %d", err, encoding.SchemaVersion+1)
	}
}

func TestForRuns_SplitsByDayAndLimit(t *testing.T) {
	base := int64(1763769600) * 1e9
	var samples []Sample
	for i := range 7 {
		samples = append(samples, Sample{TS: base - 3e9 + int64(i)*1e9})
	}
	var got [][2]int
	forRuns(samples, 2, func(day int32, run []Sample) error {
		if encoding.DayOf(run[0].TS) != day || encoding.DayOf(run[len(run)-1].TS) != day {
			t.Errorf("run %v is not all of day %d", run, day)
		}
		got = append(got, [2]int{int(day - encoding.DayOf(base)), len(run)})
		return nil
	})
	want := [][2]int{{-1, 2}, {-1, 1}, {0, 2}, {0, 2}}
	if !slices.Equal(got, want) {
		t.Errorf("runs (day, length): got %v, want %v", got, want)
	}
}

// openWriterOpts is openWriter with other options.
func openWriterOpts(t *testing.T, dir string, opts WriterOptions) (*Store, *testWriter) {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWriter{Writer: NewWriter(s, opts), cancel: cancel, done: make(chan error)}
	go func() { tw.done <- tw.Run(ctx) }()
	return s, tw
}

// TestRunMax_WorstCaseFitsAValue encodes a run of runMax samples as
// irregular and as random as a day allows: its value must stay under the
// store's value limit, with the smallest memtable.
func TestRunMax_WorstCaseFitsAValue(t *testing.T) {
	s, _ := testStoreOpts(t, Options{MemTableSize: 1 << 20}, unsealed)
	rng := rand.New(rand.NewPCG(9, 10))
	base := int64(1763769600) * 1e9
	n := s.runMax()
	run := make([]Sample, n)
	for i := range run {
		v := math.Float64frombits(rng.Uint64())
		for math.IsNaN(v) || math.IsInf(v, 0) {
			v = math.Float64frombits(rng.Uint64())
		}
		run[i] = Sample{TS: base + rng.Int64N(day), Value: v}
	}
	slices.SortFunc(run, compareSamples)
	e, err := runEntry(newSeriesState("d", "m", time.Now()), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.value) > s.maxValue || len(e.value) > encoding.RunHeaderMax+n*encoding.RunSampleMax {
		t.Errorf("a run of %d samples takes %d bytes: over the %d-byte limit or %d a sample", n, len(e.value), s.maxValue, encoding.RunSampleMax)
	}
	t.Logf("%d samples, %d bytes (%.1f a sample), limit %d", n, len(e.value), float64(len(e.value))/float64(n), s.maxValue)
}
