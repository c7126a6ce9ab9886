package buffer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// sealOpts seals often and only when told to, apart from full buckets.
var sealOpts = WriterOptions{BucketSamples: 10, SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour}

const day = int64(encoding.NanosPerDay)

// sortSeries sorts readings of one series in store order.
func sortSeries(rs []Reading) {
	slices.SortFunc(rs, func(a, b Reading) int {
		sa, sb := Sample{TS: a.TS, Value: a.Value}, Sample{TS: b.TS, Value: b.Value}
		switch {
		case sa.Less(sb):
			return -1
		case sb.Less(sa):
			return 1
		}
		return 0
	})
}

// sameReadings compares readings bit for bit (NaN included).
func sameReadings(got, want []Reading) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d readings, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Device != w.Device || g.Metric != w.Metric || g.TS != w.TS || math.Float64bits(g.Value) != math.Float64bits(w.Value) || g.Text != w.Text {
			return fmt.Errorf("reading %d: got %+v, want %+v", i, g, w)
		}
	}
	return nil
}

// checkBuckets checks the sealed buckets of every series: non-overlapping,
// within one day, at most max samples, keyed by their first sample. It
// returns how many readings they hold.
func checkBuckets(t *testing.T, s *Store, max int) int {
	t.Helper()
	total := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindBucket)}})
		defer it.Close()
		var prevSeries string
		var prevLast Sample
		for it.Rewind(); it.Valid(); it.Next() {
			dev, metric, first, err := encoding.ParseBucketKey(it.Item().Key())
			if err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			smp, err := encoding.DecodeBucket(nil, v)
			if err != nil {
				return err
			}
			if len(smp) == 0 || len(smp) > max {
				return fmt.Errorf("bucket %s/%s@%d holds %d samples, want 1..%d", dev, metric, first.TS, len(smp), max)
			}
			if !smp[0].Same(first) {
				return fmt.Errorf("bucket key names %+v, first sample is %+v", first, smp[0])
			}
			if encoding.DayOf(smp[0].TS) != encoding.DayOf(smp[len(smp)-1].TS) {
				return fmt.Errorf("bucket %s/%s@%d spans two days", dev, metric, first.TS)
			}
			if id := seriesID(dev, metric); id == prevSeries && !prevLast.Less(smp[0]) {
				return fmt.Errorf("bucket %s/%s@%d overlaps the one before (which ends at %+v)", dev, metric, first.TS, prevLast)
			} else {
				prevSeries = id
			}
			prevLast = smp[len(smp)-1]
			total += len(smp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// randomReadings returns n readings of one series with adversarial values
// and timestamps over a few days, in random order, without repeats.
func randomReadings(rng *rand.Rand, device, metric string, n int) []Reading {
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.MaxFloat64, -math.SmallestNonzeroFloat64, 0.1 + 0.2}
	base := int64(1763769600) * 1e9  // a UTC midnight
	seen := make(map[[2]uint64]bool) // by timestamp and value bits: NaN != NaN
	var out []Reading
	for len(out) < n {
		var ts int64
		switch rng.IntN(4) {
		case 0: // a timestamp already used, with another value
			if len(out) > 0 {
				ts = out[rng.IntN(len(out))].TS
				break
			}
			fallthrough
		case 1: // around a day boundary
			ts = base + int64(rng.IntN(3)+1)*day + int64(rng.IntN(2001)-1000)*1e6
		default:
			ts = base + rng.Int64N(3*day)
		}
		v := math.Round(rng.NormFloat64()*1000) / 100
		if rng.IntN(8) == 0 {
			v = specials[rng.IntN(len(specials))]
		}
		key := [2]uint64{uint64(ts), math.Float64bits(v)}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Reading{Device: device, Metric: metric, TS: ts, Value: v})
	}
	return out
}

func TestSeal_RoundTripThroughBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s, w := testStoreWith(t, "", sealOpts)
	ctx := context.Background()
	want := randomReadings(rng, "dev", "t", 700)
	// Write in random batches, sealing now and then, with repeats.
	for i := 0; i < len(want); {
		n := min(1+rng.IntN(40), len(want)-i)
		batch := slices.Clone(want[i : i+n])
		if i > 0 && rng.IntN(3) == 0 {
			batch = append(batch, want[rng.IntN(i)]) // redelivery of a stored one
		}
		write(t, w, batch...)
		i += n
		if rng.IntN(4) == 0 {
			if err := w.SealDue(ctx, time.Unix(0, want[i-1].TS)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.SealDue(ctx, time.Unix(0, math.MaxInt64)); err != nil {
		t.Fatal(err)
	}
	if n := checkBuckets(t, s, sealOpts.BucketSamples); n != len(want) {
		t.Errorf("buckets hold %d readings, want all %d", n, len(want))
	}
	if n := s.ReadingCount(); n != uint64(len(want)) {
		t.Errorf("ReadingCount: got %d, want %d", n, len(want))
	}
	sortSeries(want)
	checkReadings(t, s, "dev", want)
	// Every reading is now in a bucket: writing them again stores nothing.
	if res := write(t, w, want...); res.Stored != 0 || res.Duplicates != len(want) {
		t.Errorf("rewrite after sealing: got %+v, want all duplicates", res)
	}
}

func TestSeal_QueriesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s, w := testStoreWith(t, "", sealOpts)
	var ref []Reading
	for _, m := range []string{"a", "b", "c"} {
		rs := randomReadings(rng, "dev", m, 300)
		for i := 0; i < len(rs); i += 25 {
			write(t, w, rs[i:min(i+25, len(rs))]...)
		}
		ref = append(ref, rs...)
		if err := w.SealDue(context.Background(), time.Unix(0, rs[len(rs)/2].TS)); err != nil {
			t.Fatal(err)
		}
	}
	write(t, w, Reading{Device: "other", Metric: "a", TS: 5, Value: 1})
	checkBuckets(t, s, sealOpts.BucketSamples)
	checkRandomQueries(t, rng, s, ref, "dev", []string{"a", "b", "c", "zz"}, 300, 120)
}

// checkReadings checks that all readings of device are want, in order.
func checkReadings(t *testing.T, s *Store, device string, want []Reading) {
	t.Helper()
	got, err := s.Readings(all(device))
	if err != nil {
		t.Fatal(err)
	}
	if err := sameReadings(got, want); err != nil {
		t.Error(err)
	}
}

// checkRandomQueries runs n random queries of device (all metrics or one
// of metrics; limits up to maxLimit; bounds at or near readings of ref) and
// checks each against naiveQuery on ref.
func checkRandomQueries(t *testing.T, rng *rand.Rand, s *Store, ref []Reading, device string, metrics []string, n, maxLimit int) {
	t.Helper()
	for i := range n {
		q := Query{Device: device, From: math.MinInt64, To: math.MaxInt64, Desc: rng.IntN(2) == 0, Limit: 1 + rng.IntN(maxLimit)}
		if rng.IntN(2) == 0 {
			q.Metric = metrics[rng.IntN(len(metrics))]
		}
		if rng.IntN(3) > 0 {
			a, b := ref[rng.IntN(len(ref))].TS+int64(rng.IntN(3)-1), ref[rng.IntN(len(ref))].TS
			q.From, q.To = min(a, b), max(a, b)
		}
		got, err := s.Readings(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameReadings(got, naiveQuery(ref, q)); err != nil {
			t.Fatalf("query %d %+v: %v", i, q, err)
		}
	}
}

// naiveQuery answers q from a plain list of readings.
func naiveQuery(rs []Reading, q Query) []Reading {
	var out []Reading
	for _, r := range rs {
		if r.Device == q.Device && (q.Metric == "" || r.Metric == q.Metric) && r.TS >= q.From && r.TS < q.To {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Reading) int {
		if before(a, b, q.Desc) {
			return -1
		}
		if before(b, a, q.Desc) {
			return 1
		}
		return 0
	})
	return out[:min(len(out), q.Limit)]
}

func TestSeal_FullBucketsSealAtOnce(t *testing.T) {
	s, w := testStoreWith(t, "", sealOpts)
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 25 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i) / 10})
	}
	write(t, w, rs...)
	// Two full buckets sealed after the checkpoint; five points stay open.
	checkpoint(t, w)
	if got := checkBuckets(t, s, 10); got != 20 {
		t.Errorf("sealed %d readings, want 20", got)
	}
	if got := countPoints(t, s); got != 5 {
		t.Errorf("open points: got %d, want 5", got)
	}
}

// countPoints counts the open readings on disk, run by run.
func countPoints(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindPoint)}})
		defer it.Close()
		var run []Sample
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) (err error) {
				run, err = encoding.DecodeRun(run[:0], encoding.ParsePointTail(it.Item().Key()), v)
				return err
			})
			if err != nil {
				return err
			}
			n += len(run)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSeal_ReopenSealsWhatWasOpen(t *testing.T) {
	dir := t.TempDir()
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 7 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i)})
	}
	func() {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w := NewWriter(s, sealOpts)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		write(t, w, rs...)
		cancel()
		<-done
	}()
	s, w := testStoreWith(t, dir, sealOpts)
	if err := w.SealDue(context.Background(), time.Unix(0, base+2*day)); err != nil {
		t.Fatal(err)
	}
	if got := checkBuckets(t, s, 10); got != 7 {
		t.Errorf("after reopen and a day boundary: sealed %d readings, want 7", got)
	}
	checkReadings(t, s, "d", rs)
	if se := s.SeriesList(); len(se) != 1 || se[0].Last != rs[6].TS {
		t.Errorf("series after sealing: got %+v, want last %d", se, rs[6].TS)
	}
}

func TestSeal_SplitsAcrossTransactions(t *testing.T) {
	// A 1 MiB memtable takes about 1,600 entries per transaction; sealing
	// 6,000 open points (and deleting them) must take several.
	// Nothing is sealed until SealDue, which then has too much for one
	// transaction, even for one series alone.
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20},
		WriterOptions{BucketSamples: 1000, SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour, noSeal: true})
	ctx := context.Background()
	base := int64(1763769600) * 1e9
	var want []Reading
	for m := range 3 {
		for i := range 2000 {
			want = append(want, Reading{Device: "d", Metric: "m" + strconv.Itoa(m), TS: base + int64(i)*1e9, Value: float64(i%17) / 4})
		}
	}
	for i := 0; i < len(want); i += 500 {
		write(t, w, want[i:i+500]...)
	}
	if err := w.SealDue(ctx, time.Unix(0, base+2*day)); err != nil {
		t.Fatal(err)
	}
	if n := checkBuckets(t, s, 1000); n != len(want) {
		t.Errorf("sealed %d readings, want %d", n, len(want))
	}
	if n := countPoints(t, s); n != 0 {
		t.Errorf("%d points left open", n)
	}
	got, err := s.Readings(Query{Device: "d", From: math.MinInt64, To: math.MaxInt64, Limit: MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, func(a, b Reading) int {
		if before(a, b, false) {
			return -1
		}
		return 1
	})
	if err := sameReadings(got, want); err != nil {
		t.Error(err)
	}
}

func TestSeal_LateReadingsMergedInParts(t *testing.T) {
	// 3,000 late readings inside the span of a sealed bucket, sealed with
	// a 1 MiB memtable: the merge takes several transactions, and each part
	// must see what the one before wrote.
	// Sealed only when told, so that the late readings pile up.
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20},
		WriterOptions{BucketSamples: 200, SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour, noSeal: true})
	ctx := context.Background()
	base := int64(1763769600) * 1e9
	var want []Reading
	for i := range 200 {
		want = append(want, Reading{Device: "d", Metric: "m", TS: base + int64(i)*1e9, Value: 1})
	}
	write(t, w, want...)
	if err := w.SealDue(ctx, time.Unix(0, base+2*day)); err != nil { // one full bucket
		t.Fatal(err)
	}
	var late []Reading
	for i := range 3000 {
		late = append(late, Reading{Device: "d", Metric: "m", TS: base + int64(i%199)*1e9 + 1e6*int64(1+i/199), Value: 2})
	}
	for i := 0; i < len(late); i += 500 {
		write(t, w, late[i:i+500]...)
	}
	want = append(want, late...)
	if err := w.SealDue(ctx, time.Unix(0, base+2*day)); err != nil {
		t.Fatal(err)
	}
	if n := checkBuckets(t, s, 200); n != len(want) {
		t.Errorf("buckets hold %d readings, want %d", n, len(want))
	}
	got, err := s.Readings(Query{Device: "d", From: math.MinInt64, To: math.MaxInt64, Limit: MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	sortSeries(want)
	if err := sameReadings(got, want); err != nil {
		t.Error(err)
	}
	if n := s.ReadingCount(); n != uint64(len(want)) {
		t.Errorf("ReadingCount: got %d, want %d", n, len(want))
	}
}

func TestStore_RepairsPointsALostSealLeftBehind(t *testing.T) {
	dir := t.TempDir()
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 30 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(i)*1e9, Value: float64(i)})
	}
	func() {
		s, w := openWriter(t, dir)
		defer s.Close()
		defer w.stop()
		write(t, w.Writer, rs...)
		checkpoint(t, w.Writer) // sealed after the first checkpoint: 30 readings in 3 buckets
		if n := checkBuckets(t, s, 10); n != 30 {
			t.Fatalf("sealed %d readings, want 30", n)
		}
		// As after a power cut that lost a seal's deletes but kept a later
		// merge: the points are back beside the buckets that hold them.
		// One run holds two such points and one new reading, which stays.
		wb := s.db.NewWriteBatch()
		for _, r := range rs[:17] {
			if err := wb.Set(encoding.AppendPointKey(nil, r), nil); err != nil {
				t.Fatal(err)
			}
		}
		late := Reading{Device: "d", Metric: "m", TS: rs[18].TS + 1, Value: 99}
		run, err := runEntry(newSeriesState("d", "m", time.Now()), []Sample{{TS: rs[17].TS, Value: rs[17].Value}, {TS: late.TS, Value: late.Value}, {TS: rs[19].TS, Value: rs[19].Value}})
		if err != nil {
			t.Fatal(err)
		}
		if err := wb.Set(run.key, run.value); err != nil {
			t.Fatal(err)
		}
		// And two open runs of a later day that overlap (a seal that cut a
		// run was lost, a later one that cut the rest survived): 0 and -0
		// are two readings.
		next := base + day
		for _, run := range [][]Sample{{{TS: next, Value: 0}, {TS: next, Value: math.Copysign(0, -1)}, {TS: next + 1, Value: 1}}, {{TS: next + 1, Value: 1}, {TS: next + 2, Value: 2}}} {
			e, err := runEntry(newSeriesState("d", "m", time.Now()), run)
			if err != nil {
				t.Fatal(err)
			}
			if err := wb.Set(e.key, e.value); err != nil {
				t.Fatal(err)
			}
		}
		if err := wb.Flush(); err != nil {
			t.Fatal(err)
		}
		rs = slices.Insert(rs, 19, late)
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: next, Value: 0}, Reading{Device: "d", Metric: "m", TS: next, Value: math.Copysign(0, -1)},
			Reading{Device: "d", Metric: "m", TS: next + 1, Value: 1}, Reading{Device: "d", Metric: "m", TS: next + 2, Value: 2})
	}()
	s, _ := testStoreWith(t, dir, sealOpts)
	if n := countPoints(t, s); n != 5 {
		t.Errorf("after Open: %d open points, want 5 (the new one, and 4 of the later day)", n)
	}
	checkReadings(t, s, "d", rs)
}

// openWriter opens a store in dir and runs a writer with sealOpts; stop it
// with Writer.stop via the returned writer's context.
func openWriter(t *testing.T, dir string) (*Store, *testWriter) {
	t.Helper()
	return openWriterOpts(t, dir, sealOpts)
}

// testWriter is a Writer running in a goroutine of a test.
type testWriter struct {
	*Writer
	cancel context.CancelFunc
	done   chan error
}

func (tw *testWriter) stop() {
	tw.cancel()
	<-tw.done
}

// TestWriter_DrainSealsByOpenedSamples: in a drain, commits follow one
// another with no pause, and checkpoints in their middle add open points
// (held in memory until sealed) faster than sealAfterCommits lets them be
// sealed. Sealing comes once sealAfterOpened samples were added: the open
// points stay bounded, where they held the whole drain.
func TestWriter_DrainSealsByOpenedSamples(t *testing.T) {
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20}, WriterOptions{SealCheck: 24 * time.Hour, sealAfter: 24 * time.Hour})
	const series, perBatch, total = 20, 2000, 400_000
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := 0; i < total; i += perBatch {
		rs := make([]Reading, perBatch)
		for j := range rs {
			n := i + j
			rs[j] = Reading{Device: fmt.Sprintf("dev-%02d", n%series), Metric: "t", TS: base + int64(n/series)*1e9, Value: float64(n % 997)}
		}
		write(t, w, rs...)
	}
	var open, most int
	if err := w.do(context.Background(), func() error {
		for _, st := range s.series {
			for _, pts := range st.days() {
				open += len(pts)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if c := w.checkpoints.Load(); c < 10 {
		t.Fatalf("%d checkpoints in the drain; the test needs commits that checkpoint", c)
	}
	// What a checkpoint adds beyond the bound, and a bucket short of
	// full in each series.
	most = sealAfterOpened + total/int(w.checkpoints.Load()) + series*w.opts.BucketSamples
	t.Logf("%d open points after %d readings, %d checkpoints", open, total, w.checkpoints.Load())
	if open > most {
		t.Errorf("%d open points after a drain of %d readings, want at most %d", open, total, most)
	}
}
