package buffer

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// latestAt is the time of the readings of the latest tests.
var latestAt = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC).UnixNano()

// TestStore_Latest reads the newest reading of each series from the
// journal (without a checkpoint), from open runs, from sealed buckets and
// after a restart: a reading that comes late with an older time does not
// change it, and of two readings at the newest time it is the one a
// query newest first gives first, before and after a checkpoint.
func TestStore_Latest(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{BucketSamples: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	if got, err := s.LatestAll(); err != nil || got != nil {
		t.Fatalf("LatestAll of an empty store = %v, %v; want none", got, err)
	}
	sec := int64(time.Second)
	write(t, w,
		Reading{Device: "kitchen", Metric: "t", TS: latestAt, Value: 20, Unit: "°C"},
		Reading{Device: "kitchen", Metric: "t", TS: latestAt + 2*sec, Value: 22, Unit: "°C"},
		Reading{Device: "kitchen", Metric: "t", TS: latestAt + sec, Value: 21, Unit: "°C"},
		Reading{Device: "kitchen", Metric: "h", TS: latestAt, Value: 41},
		Reading{Device: "kitchen", Metric: "h", TS: latestAt, Value: 40}, // stored last, yet not the greater
		Reading{Device: "cellar", Metric: "t", TS: latestAt - sec, Value: 9.5, Unit: "°C"},
	)
	// Late, and older than the newest of its series.
	write(t, w, Reading{Device: "kitchen", Metric: "t", TS: latestAt - 60*sec, Value: 1, Unit: "°C"})
	kitchen := []Reading{
		{Device: "kitchen", Metric: "h", TS: latestAt, Value: 41},
		{Device: "kitchen", Metric: "t", TS: latestAt + 2*sec, Value: 22, Unit: "°C"},
	}
	all := append([]Reading{{Device: "cellar", Metric: "t", TS: latestAt - sec, Value: 9.5, Unit: "°C"}}, kitchen...)
	check := func(s *Store, when string) {
		t.Helper()
		if got, err := s.Latest("kitchen"); err != nil || !reflect.DeepEqual(got, kitchen) {
			t.Errorf("%s: Latest(kitchen) = %+v, %v; want %+v", when, got, err, kitchen)
		}
		if got, err := s.Latest("kitchen", "cellar", "attic"); err != nil || !reflect.DeepEqual(got, all) {
			t.Errorf("%s: Latest(kitchen, cellar, attic) = %+v, %v; want %+v", when, got, err, all)
		}
		if got, err := s.LatestAll(); err != nil || !reflect.DeepEqual(got, all) {
			t.Errorf("%s: LatestAll = %+v, %v; want %+v", when, got, err, all)
		}
		keepT := func(_, metric string) bool { return metric == "t" }
		if got, err := s.LatestFunc(keepT); err != nil || !reflect.DeepEqual(got, []Reading{all[0], all[2]}) {
			t.Errorf("%s: LatestFunc(metric t) = %+v, %v; want %+v", when, got, err, []Reading{all[0], all[2]})
		}
		if got, err := s.Latest("attic"); err != nil || got != nil {
			t.Errorf("%s: Latest(attic) = %+v, %v; want none", when, got, err)
		}
	}

	// The readings are in the journal, and the Writer finds them there:
	// reading them writes nothing.
	before := w.Stats().Checkpoints
	check(s, "in the journal")
	if n := w.Stats().Checkpoints; n != before {
		t.Errorf("Latest checkpointed the journal (%d checkpoints, %d before)", n, before)
	}
	if err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ws := w.Stats(); ws.Sealed == 0 {
		t.Fatalf("no reading sealed (%+v): the buckets are not read", ws)
	}
	check(s, "in open runs and sealed buckets")

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, _ := testStore(t, dir)
	check(s2, "after a restart")
}

// A series whose raw readings retention removed has no latest reading;
// the other series of its device keep theirs.
func TestStore_LatestAfterPrune(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{Retention: RetentionPolicy{RawMaxAge: time.Hour}})
	now := time.Now()
	write(t, w,
		Reading{Device: "d", Metric: "old", TS: now.Add(-2 * time.Hour).UnixNano(), Value: 1},
		Reading{Device: "d", Metric: "new", TS: now.Add(-time.Minute).UnixNano(), Value: 2},
	)
	if err := w.Prune(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	want := []Reading{{Device: "d", Metric: "new", TS: now.Add(-time.Minute).UnixNano(), Value: 2}}
	if got, err := s.Latest("d"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Latest(d) = %+v, %v; want %+v", got, err, want)
	}
}
