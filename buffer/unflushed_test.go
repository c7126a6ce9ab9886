package buffer

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// TestQueries_ReadTheJournalAsCheckpointed asks the same queries while
// readings are in the journal and after the checkpoint, and checks that
// the first queries wrote nothing and that both answers are the same:
// readings merged with open points and buckets, records that the
// journal adds to (minutes, and the hours and days of late readings,
// rolled up already), records it alone makes, a series that is only in
// the journal, and readings sharing a timestamp (sums may differ in their last bits: see
// sameAnswer).
func TestQueries_ReadTheJournalAsCheckpointed(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{CheckpointInterval: time.Hour, SealCheck: 24 * time.Hour, BucketSamples: 4})
	now := time.Now().Truncate(time.Minute).UnixNano()
	past := aggregate.Day.Truncate(now) - 3*day
	minute := int64(time.Minute)
	value := func(i int) float64 { return float64(i%17)/3 - 2 }

	// Stored: three days of readings every 7 minutes, checkpointed,
	// sealed and rolled up.
	var stored []Reading
	for i := range 3 * 24 * 60 / 7 {
		ts := past + int64(i)*7*minute + int64(i%5)*int64(time.Second)
		stored = append(stored,
			Reading{Device: "kitchen", Metric: "t", TS: ts, Value: value(i)},
			Reading{Device: "kitchen", Metric: "h", TS: ts, Value: value(i + 3)},
			Reading{Device: "garage", Metric: "t", TS: ts, Value: value(i + 5)})
	}
	for i := 0; i < len(stored); i += 500 {
		write(t, w, stored[i:min(i+500, len(stored))]...)
	}
	checkpoint(t, w)
	if err := w.SealDue(context.Background(), time.Unix(0, now+day)); err != nil {
		t.Fatal(err)
	}
	if err := w.RollUp(context.Background(), time.Unix(0, now)); err != nil {
		t.Fatal(err)
	}

	// In the journal: late readings in rolled-up hours and days, some in
	// minutes that have a record and some in minutes that have none,
	// readings of this hour, a reading sharing a timestamp with a stored
	// one, and a series with no reading stored.
	var journal []Reading
	for i := range 40 {
		ts := past + int64(i)*97*minute + 13*int64(time.Second)
		journal = append(journal,
			Reading{Device: "kitchen", Metric: "t", TS: ts, Value: value(i) + 0.1},
			Reading{Device: "kitchen", Metric: "p", TS: ts, Value: 1000 + value(i)})
	}
	for i := range 20 {
		journal = append(journal, Reading{Device: "kitchen", Metric: "t", TS: now - int64(i)*int64(time.Second)*10, Value: value(i) * 3})
	}
	journal = append(journal, Reading{Device: "kitchen", Metric: "h", TS: stored[1].TS, Value: stored[1].Value + 1})
	for i := 0; i < len(journal); i += 25 {
		write(t, w, journal[i:min(i+25, len(journal))]...)
	}

	type answer struct {
		what string
		got  any
	}
	ask := func() []answer {
		var out []answer
		for _, device := range []string{"kitchen", "garage"} {
			for _, q := range []Query{
				all(device),
				{Device: device, From: math.MinInt64, To: math.MaxInt64, Desc: true, Limit: 50},
				{Device: device, Metric: "t", From: past + day + 5*minute, To: now - 30*int64(time.Second), Limit: MaxQueryLimit},
				{Device: device, Metric: "p", From: past, To: now + minute, Desc: true, Limit: 7},
			} {
				rs, err := s.Readings(q)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, answer{fmt.Sprintf("Readings(%+v)", q), rs})
			}
			for _, metric := range []string{"t", "h", "p"} {
				for _, r := range [][2]int64{
					{past - day, now + time.Hour.Nanoseconds()},
					{past + 90*int64(time.Second), now + minute},
					{past + day + 3*time.Hour.Nanoseconds() + 17*int64(time.Second), past + 2*day + 61*minute},
					{now - 2*time.Hour.Nanoseconds() - 7*int64(time.Second), now + 1},
				} {
					st, _, err := s.StatsCover(device, metric, r[0], r[1])
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, answer{fmt.Sprintf("StatsCover(%s, %s, %d, %d)", device, metric, r[0], r[1]), st})
					for _, level := range []aggregate.Level{aggregate.Minute, aggregate.Hour, aggregate.Day} {
						sts, _, err := s.StatsByLevel(device, metric, level, r[0], r[1])
						if err != nil {
							t.Fatal(err)
						}
						out = append(out, answer{fmt.Sprintf("StatsByLevel(%s, %s, %v, %d, %d)", device, metric, level, r[0], r[1]), sts})
					}
				}
			}
		}
		return out
	}

	before := w.Stats().Checkpoints
	inJournal := ask()
	if n := w.Stats().Checkpoints; n != before {
		t.Fatalf("the queries checkpointed the journal (%d checkpoints, %d before)", n, before)
	}
	if n := countKeys(t, s, encoding.KindOutbox); n == 0 {
		t.Fatal("the journal is empty: the test reads nothing from it")
	}
	checkpoint(t, w)
	if n := countKeys(t, s, encoding.KindOutbox); n != 0 {
		t.Fatalf("%d journal entries after the checkpoint", n)
	}
	after := ask()
	for i := range after {
		if !sameAnswer(inJournal[i].got, after[i].got) {
			t.Errorf("%s:\nwith the journal   %+v\nafter a checkpoint %+v", after[i].what, inJournal[i].got, after[i].got)
		}
	}
	// The answers do hold the journal's readings.
	want := map[string]int{}
	for _, r := range append(stored, journal...) {
		want[r.Device+"/"+r.Metric]++
	}
	for _, k := range []string{"kitchen/t", "kitchen/h", "kitchen/p", "garage/t"} {
		device, metric, _ := strings.Cut(k, "/")
		st, _, err := s.StatsCover(device, metric, math.MinInt64/2, math.MaxInt64/2)
		if err != nil {
			t.Fatal(err)
		}
		if int(st.Count) != want[k] {
			t.Errorf("%s: %d readings counted, want %d", k, st.Count, want[k])
		}
	}
}

// sameAnswer reports whether two answers of a query are the same: the
// same readings, or the same records with the same counts, minima and
// maxima, and sums that differ at most in the last bits. The checkpoint
// rolls up the hours it completes, and a sum of hour records adds in
// another order than the sum of their minutes.
func sameAnswer(a, b any) bool {
	near := func(x, y float64) bool { return x == y || math.Abs(x-y) <= 1e-12*math.Max(math.Abs(x), math.Abs(y)) }
	same := func(x, y aggregate.Stats) bool {
		return x.Count == y.Count && x.Min == y.Min && x.Max == y.Max && near(x.Sum, y.Sum) && near(x.SumSqr, y.SumSqr)
	}
	switch a := a.(type) {
	case aggregate.Stats:
		return same(a, b.(aggregate.Stats))
	case []StatsAt:
		b := b.([]StatsAt)
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i].Start != b[i].Start || !same(a[i].Stats, b[i].Stats) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// TestQueries_JournalAndCheckpointsRace queries while readings are
// committed and checkpointed all the time, and checks that no answer
// counts a reading twice or misses one acknowledged before it began.
func TestQueries_JournalAndCheckpointsRace(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{CheckpointInterval: time.Millisecond, BucketSamples: 8})
	base := time.Now().Add(-time.Hour).Truncate(time.Hour).UnixNano()
	const n = 3000
	var acked atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { failed.Store(acked.Load() < n) }()
		for i := range n {
			ch := make(chan Result, 1)
			r := Reading{Device: "d", Metric: "v", TS: base + int64(i)*int64(time.Second), Value: 1}
			if err := w.Submit(context.Background(), []Reading{r}, func(res Result) { ch <- res }); err != nil {
				t.Error(err)
				return
			}
			if res := <-ch; res.Err != nil || res.Stored != 1 {
				t.Errorf("write %d: %+v", i, res)
				return
			}
			acked.Store(int64(i + 1))
		}
	}()
	queries := 0
	for acked.Load() < n && !failed.Load() {
		low := acked.Load()
		st, _, err := s.StatsCover("d", "v", base, base+n*int64(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Readings(Query{Device: "d", Metric: "v", From: base, To: base + n*int64(time.Second), Limit: MaxQueryLimit})
		if err != nil {
			t.Fatal(err)
		}
		high := acked.Load() + 1 // one more may be stored and not yet acknowledged
		if c := int64(st.Count); c < low || c > high || st.Sum != float64(c) {
			t.Fatalf("stats counted %d readings (sum %v), with %d to %d stored", c, st.Sum, low, high)
		}
		if c := int64(len(rs)); c < low || c > high {
			t.Fatalf("query returned %d readings, with %d to %d stored", c, low, high)
		}
		for i, r := range rs {
			if r.TS != base+int64(i)*int64(time.Second) {
				t.Fatalf("reading %d at %d, want %d: missed or repeated", i, r.TS, base+int64(i)*int64(time.Second))
			}
		}
		queries++
	}
	wg.Wait()
	if ws := w.Stats(); ws.Checkpoints < 10 {
		t.Errorf("only %d checkpoints during the queries: the race was not run", ws.Checkpoints)
	}
	t.Logf("%d queries during %d checkpoints", queries, w.Stats().Checkpoints)
}

// TestQueries_RollUpMarksTakenWithTheSnapshot queues a stats query behind
// a Writer step that rolls up an hour and prunes its minute records: the
// query must read the hour's record, not the minutes that were there when
// it was asked.
func TestQueries_RollUpMarksTakenWithTheSnapshot(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{CheckpointInterval: time.Hour, SealCheck: 24 * time.Hour})
	hour := time.Now().Truncate(time.Hour).UnixNano()
	var rs []Reading
	for i := range 30 {
		rs = append(rs, Reading{Device: "d", Metric: "v", TS: hour + int64(i)*int64(time.Minute), Value: float64(i)})
	}
	write(t, w, rs...)
	checkpoint(t, w) // the hour is not over: not rolled up

	release := make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- w.do(context.Background(), func() error {
			<-release
			if err := w.rollUp(time.Unix(0, hour).Add(3*time.Hour), nil); err != nil {
				return err
			}
			_, err := w.pruneStatsBefore([3]int64{math.MaxInt64, math.MinInt64, math.MinInt64}, 1000)
			return err
		})
	}()
	type answer struct {
		st  aggregate.Stats
		err error
	}
	got := make(chan answer, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // the step above holds the Writer
		st, _, err := s.StatsCover("d", "v", hour-time.Hour.Nanoseconds(), hour+2*time.Hour.Nanoseconds())
		got <- answer{st, err}
	}()
	time.Sleep(200 * time.Millisecond) // the query waits behind the step
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.st.Count != 30 {
		t.Fatalf("StatsCover while the hour was rolled up and its minutes pruned: %+v, %v; want 30 readings", a.st, a.err)
	}
	if n := countKeys(t, s, encoding.KindMinute); n != 0 {
		t.Fatalf("%d minute records left: the test pruned nothing", n)
	}
}
