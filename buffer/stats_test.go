package buffer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

func TestStatsEncodingSize(t *testing.T) {
	if got := int64(len(aggregate.Stats{Count: 1}.Append(nil))) + 2; got != statsEntrySize {
		t.Fatalf("statsEntrySize is %d, the encoding needs %d", statsEntrySize, got)
	}
}

// naiveStats aggregates the readings of one series in [from, to).
func naiveStats(rs []Reading, from, to int64) aggregate.Stats {
	var st aggregate.Stats
	for _, r := range rs {
		if r.TS >= from && r.TS < to {
			st.Add(r.Value)
		}
	}
	return st
}

// sameStats compares aggregates: count, min and max exactly; sum and
// sumsqr within the bound of adding the same n values in two different
// orders. Each order is off the exact sum by at most (n-1)·ε·Σ|v|
// (Higham, "Accuracy and Stability of Numerical Algorithms", 4.2), so two
// orders differ by at most twice that.
func sameStats(got, want aggregate.Stats) bool {
	if got.Count != want.Count {
		return false
	}
	if got.Count == 0 {
		return true
	}
	if got.Min != want.Min || got.Max != want.Max {
		return false
	}
	// Σ|v| ≤ n·max|v|: a bound that needs only the aggregate. Squares of
	// extreme values overflow to +Inf in either order.
	n := float64(got.Count)
	maxAbs := math.Max(math.Abs(want.Min), math.Abs(want.Max))
	close := func(a, b, sumAbs float64) bool { return a == b || math.Abs(a-b) <= 2*n*0x1p-52*sumAbs }
	return close(got.Sum, want.Sum, n*maxAbs) && close(got.SumSqr, want.SumSqr, n*maxAbs*maxAbs)
}

func TestStats_MatchRecomputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s, w := testStoreWith(t, "", sealOpts)
	ctx := context.Background()
	base := int64(1763769600) * 1e9 // a UTC midnight
	var stored []Reading
	seen := map[[2]uint64]bool{}
	var all []Reading
	for len(all) < 3000 {
		var ts int64
		switch rng.IntN(5) {
		case 0: // a timestamp already used
			if len(all) > 0 {
				ts = all[rng.IntN(len(all))].TS
				break
			}
			fallthrough
		case 1: // around a day, hour or minute boundary
			edge := []int64{60e9, 3600e9, day}[rng.IntN(3)]
			ts = base + int64(rng.IntN(3)+1)*edge + int64(rng.IntN(2001)-1000)*1e6
		default:
			ts = base + rng.Int64N(3*day)
		}
		v := math.Round(rng.NormFloat64()*1000) / 100
		switch rng.IntN(20) {
		case 0:
			v = 1e300 * float64(rng.IntN(3)-1)
		case 1:
			v = -math.SmallestNonzeroFloat64
		}
		all = append(all, Reading{Device: "d", Metric: "m", TS: ts, Value: v})
	}
	// Write in random order and batches, with redeliveries, sealing now
	// and then.
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for i := 0; i < len(all); {
		n := min(1+rng.IntN(60), len(all)-i)
		batch := append([]Reading(nil), all[i:i+n]...)
		if i > 0 && rng.IntN(3) == 0 {
			batch = append(batch, all[rng.IntN(i)])
		}
		write(t, w, batch...)
		for _, r := range all[i : i+n] {
			k := [2]uint64{uint64(r.TS), math.Float64bits(r.Value)}
			if !seen[k] {
				seen[k] = true
				stored = append(stored, r)
			}
		}
		i += n
		if rng.IntN(5) == 0 {
			if err := w.SealDue(ctx, time.Unix(0, base+rng.Int64N(4*day))); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(7) == 0 { // roll up by the clock too, now and then
			if err := w.RollUp(ctx, time.Unix(0, base+rng.Int64N(4*day))); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkStatsQueries(t, rng, s, stored, base, false)
	// Once every hour and day is rolled up, a cover reads no more records
	// than its plan.
	if err := w.RollUp(ctx, time.Unix(0, base+10*day)); err != nil {
		t.Fatal(err)
	}
	checkStatsQueries(t, rng, s, stored, base, true)
}

// checkStatsQueries compares stats queries over random ranges with a
// recomputation from the stored readings.
func checkStatsQueries(t *testing.T, rng *rand.Rand, s *Store, stored []Reading, base int64, rolled bool) {
	t.Helper()
	for i := range 300 {
		a, b := base-day/2+rng.Int64N(4*day), base-day/2+rng.Int64N(4*day)
		if i < 10 { // whole days, hours, minutes
			edge := []int64{60e9, 3600e9, day}[i%3]
			a, b = base+int64(i)*edge, base+int64(i+2+i%3)*edge
		}
		from, to := min(a, b), max(a, b)+1
		want := naiveStats(stored, from, to)
		got, reads, err := s.StatsCover("d", "m", from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !sameStats(got, want) {
			t.Fatalf("cover [%d, %d): got %+v, want %+v", from, to, got, want)
		}
		if plan := aggregate.Cover(from, to); rolled && reads.Records > plan.Records() {
			t.Fatalf("cover [%d, %d) read %d records, the plan has %d", from, to, reads.Records, plan.Records())
		}
		level := []aggregate.Level{aggregate.Minute, aggregate.Hour, aggregate.Day}[i%3]
		if level == aggregate.Minute && to-from > 6*3600e9 {
			continue // keep the naive side quick
		}
		groups, _, err := s.StatsByLevel("d", "m", level, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var wantGroups []StatsAt
		for g := level.Truncate(from); g < to; g += int64(level.Duration()) {
			if st := naiveStats(stored, max(g, from), min(g+int64(level.Duration()), to)); !st.IsEmpty() {
				wantGroups = append(wantGroups, StatsAt{Start: g, Stats: st})
			}
		}
		if len(groups) != len(wantGroups) {
			t.Fatalf("%s groups of [%d, %d): got %d, want %d", level, from, to, len(groups), len(wantGroups))
		}
		for j := range groups {
			if groups[j].Start != wantGroups[j].Start || !sameStats(groups[j].Stats, wantGroups[j].Stats) {
				t.Fatalf("%s group %d of [%d, %d): got %+v, want %+v", level, j, from, to, groups[j], wantGroups[j])
			}
		}
	}
}

func TestStats_RedeliveryChangesNothing(t *testing.T) {
	s, w := testStore(t, "")
	r := []Reading{{Device: "d", Metric: "m", TS: 90e9, Value: 2}, {Device: "d", Metric: "m", TS: 30e9, Value: 4}}
	write(t, w, r...)
	before, _, err := s.StatsCover("d", "m", 0, day)
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, r...)
	write(t, w, r[1], r[0], r[1])
	after, _, err := s.StatsCover("d", "m", 0, day)
	if err != nil {
		t.Fatal(err)
	}
	if after != before || after.Count != 2 || after.Sum != 6 {
		t.Errorf("after redelivery: got %+v, want %+v (count 2, sum 6)", after, before)
	}
	mins, _, err := s.StatsByLevel("d", "m", aggregate.Minute, 0, day)
	if err != nil {
		t.Fatal(err)
	}
	if len(mins) != 2 || mins[0].Start != 0 || mins[0].Stats.Count != 1 || mins[1].Start != 60e9 || mins[1].Stats.Sum != 2 {
		t.Errorf("minutes: got %+v", mins)
	}
}

func TestStats_Pruned(t *testing.T) {
	day := 24 * time.Hour
	clk := &testClock{sync: SyncNo}
	s, w, _ := testStoreClock(t, clk, time.Time{}, WriterOptions{Retention: RetentionPolicy{StatsMaxAge: map[aggregate.Level]time.Duration{
		aggregate.Minute: 2 * day, aggregate.Hour: 10 * day,
	}}})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rs []Reading
	for d := range 20 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base.Add(time.Duration(d)*day + time.Minute).UnixNano(), Value: float64(d)})
	}
	write(t, w, rs...)
	ctx := context.Background()
	now := base.Add(20 * day)
	// A clock that is not trusted prunes nothing.
	if err := w.Prune(ctx, base.Add(5*day)); !errors.Is(err, ErrClockBehind) {
		t.Fatalf("clock not trusted: got %v, want ErrClockBehind", err)
	}
	clk.set(now, SyncYes)
	if err := w.Prune(ctx, now); err != nil {
		t.Fatal(err)
	}
	count := func(l aggregate.Level) int {
		groups, _, err := s.StatsByLevel("d", "m", l, base.UnixNano(), now.UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		return len(groups)
	}
	// Minute records of the last 2 days, hours of the last 10, all days.
	if got := count(aggregate.Minute); got != 2 {
		t.Errorf("minute records: got %d, want 2", got)
	}
	if got := count(aggregate.Hour); got != 10 {
		t.Errorf("hour records: got %d, want 10", got)
	}
	if got := count(aggregate.Day); got != 20 {
		t.Errorf("day records: got %d, want 20", got)
	}
	if got := w.Stats().Pruned; got != 18+10 {
		t.Errorf("pruned: got %d, want 28", got)
	}
	// The covering query still answers old ranges from the day records.
	st, _, err := s.StatsCover("d", "m", base.UnixNano(), now.UnixNano())
	if err != nil || st.Count != 20 {
		t.Errorf("cover after pruning: got %+v, %v; want all 20 readings", st, err)
	}
}

func TestStats_RollUpSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	base := int64(1763769600) * 1e9
	var rs []Reading
	for i := range 3 * 60 { // one a minute for three hours
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(i)*60e9 + 1e9, Value: float64(i)})
	}
	ctx := context.Background()
	func() {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w := NewWriter(s, WriterOptions{SealCheck: 24 * time.Hour})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- w.Run(cctx) }()
		defer func() { cancel(); <-done }()
		write(t, w, rs...)
		checkpoint(t, w) // the roll-up follows the checkpoint
		// The newest reading is in the third hour: two are rolled up.
		if got := s.rolled("d", "m"); got.hours != base+2*3600e9 {
			t.Errorf("hours rolled up to %d, want %d", got.hours, base+2*3600e9)
		}
	}()
	s, w := testStoreWith(t, dir, WriterOptions{SealCheck: 24 * time.Hour})
	if got := s.rolled("d", "m"); got.hours != base+2*3600e9 {
		t.Errorf("after reopen: hours rolled up to %d, want %d", got.hours, base+2*3600e9)
	}
	// A late reading in a rolled-up hour updates its record in its commit.
	late := Reading{Device: "d", Metric: "m", TS: base + 30e9, Value: 1000}
	write(t, w, late)
	hours, reads, err := s.StatsByLevel("d", "m", aggregate.Hour, base, base+3*3600e9)
	if err != nil {
		t.Fatal(err)
	}
	want := []aggregate.Stats{naiveStats(append(rs, late), base, base+3600e9), naiveStats(rs, base+3600e9, base+7200e9), naiveStats(rs, base+7200e9, base+3*3600e9)}
	if len(hours) != 3 {
		t.Fatalf("got %d hours, want 3", len(hours))
	}
	for i, h := range hours {
		if !sameStats(h.Stats, want[i]) {
			t.Errorf("hour %d: got %+v, want %+v", i, h.Stats, want[i])
		}
	}
	// Two hours from their records, the third from its 60 minutes.
	if reads.Records != 2+60 {
		t.Errorf("read %d records, want 62", reads.Records)
	}
}

func TestPrune_RawOlderThanMaxAgeGoAggregatesStay(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 10, SealCheck: 24 * time.Hour, Retention: RetentionPolicy{RawMaxAge: 3 * 24 * time.Hour}})
	ctx := context.Background()
	base := int64(1763769600) * 1e9 // a UTC midnight
	var rs []Reading
	for h := range 10 * 24 { // one an hour for ten days
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(h)*3600e9, Value: float64(h % 7)})
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+11*day)); err != nil {
		t.Fatal(err)
	}
	// Late readings of old days, left open.
	late := []Reading{{Device: "d", Metric: "m", TS: base + 30e9, Value: 100}, {Device: "d", Metric: "m", TS: base + 8*day + 30e9, Value: 100}}
	write(t, w, late...)
	before, _, err := s.StatsCover("d", "m", base, base+10*day)
	if err != nil {
		t.Fatal(err)
	}
	// The cut is at day 7, 12:10: days 0-6 go whole, and of day 7 the
	// buckets before it, and the part before it of the one that spans it
	// (buckets of 10 hourly readings: 00:00-09:00, 10:00-19:00, ...).
	now := time.Unix(0, base+10*day+day/2+10*60e9)
	if err := w.Prune(ctx, now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Readings(all("d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*24-13+1 || got[0].TS != base+7*day+13*3600e9 {
		t.Fatalf("after pruning: %d readings from %d, want 60 from day 7, 13:00", len(got), got[0].TS)
	}
	if n := s.ReadingCount(); n != uint64(len(got)) {
		t.Errorf("ReadingCount: got %d, want %d", n, len(got))
	}
	if n := w.Stats().PrunedReadings; n != 7*24+13+1 {
		t.Errorf("pruned readings: got %d, want %d", n, 7*24+13+1)
	}
	// History survives in the aggregates.
	after, _, err := s.StatsCover("d", "m", base, base+10*day)
	if err != nil || !sameStats(after, before) {
		t.Errorf("aggregates after pruning raw readings: got %+v, %v; want %+v", after, err, before)
	}
	if n := countPoints(t, s); n != 1 {
		t.Errorf("open points: got %d, want the one of day 8", n)
	}
}

// A query of minute records starts no goroutine per record (Badger's
// value prefetching starts one each, up to 64 at a time).
func TestStore_RecordQueriesStartNoGoroutines(t *testing.T) {
	s, w := testStore(t, "")
	base := int64(1763769600) * 1e9 // a UTC midnight
	const minutes = 300
	var rs []Reading
	for i := range minutes {
		ts := base + int64(i)*60e9
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: ts, Value: float64(i)})
		rs = append(rs, textOf("th", "mode", ts, []string{"heat", "off"}[i%2]))
	}
	write(t, w, rs...)
	checkpoint(t, w)
	created := func() uint64 {
		m := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(m)
		return m[0].Value.Uint64()
	}
	from, to := base, base+minutes*60e9
	before := created()
	for range 5 {
		// Read from the records (reads.Records), not from readings not
		// yet checkpointed.
		mins, reads, err := s.StatsByLevel("d", "m", aggregate.Minute, from, to)
		if err != nil || len(mins) != minutes || reads.Records != minutes {
			t.Fatalf("stats by minute: %d groups from %d records, %v; want %d", len(mins), reads.Records, err, minutes)
		}
		states, reads, err := s.StatesByLevel("th", "mode", aggregate.Minute, from, to, to)
		if err != nil || len(states) != minutes || reads.Records != minutes {
			t.Fatalf("states by minute: %d groups from %d records, %v; want %d", len(states), reads.Records, err, minutes)
		}
	}
	// The store's own goroutines may start one now and then; prefetching
	// started one a record: 3,000 here.
	n := created() - before
	t.Logf("10 queries of %d minute records started %d goroutines", minutes, n)
	if n > 10 {
		t.Errorf("10 queries of %d minute records started %d goroutines, want at most 10", minutes, n)
	}
}
