package buffer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// checkStatesRecords checks that the States records of a text series are
// those of its raw readings: a minute record for each minute with
// readings, an hour (day) record for each rolled-up hour (day) with
// readings, each equal to aggregate.FromSamples of the readings of its
// period, and no record of a period without readings.
func checkStatesRecords(t *testing.T, what string, s *Store, device, metric string) {
	t.Helper()
	rolled := s.rolled(device, metric)
	checked := map[aggregate.Level]int{}
	defer func() { t.Logf("%s: %s/%s: records checked %v", what, device, metric, checked) }()
	err := s.db.View(func(txn *badger.Txn) error {
		raw, err := rawStates(txn, nil, device, metric, math.MinInt64, math.MaxInt64, false, math.MaxInt)
		if err != nil {
			return err
		}
		for _, l := range allLevels {
			want := map[int64][]aggregate.Sample{}
			for _, r := range raw {
				if start := l.Truncate(r.TS); start < rolled.cut(l) {
					want[start] = append(want[start], r)
				}
			}
			got := map[int64]aggregate.States{}
			err := statesRecords(txn, l, device, metric, math.MinInt64, math.MaxInt64, nil, func(start int64, rec aggregate.States) error {
				got[start] = rec.Clone()
				return nil
			})
			if err != nil {
				return err
			}
			if len(raw) == 0 {
				t.Errorf("%s: %s/%s has no readings", what, device, metric)
			}
			checked[l] = len(want)
			for start, smps := range want {
				w := aggregate.FromSamples(smps)
				if g, ok := got[start]; !ok || !reflect.DeepEqual(g.Append(nil), w.Append(nil)) {
					t.Errorf("%s: %s/%s %v record at %s: %+v, want %+v (of %d readings)", what, device, metric, l,
						time.Unix(0, start).UTC().Format(time.RFC3339), g, w, len(smps))
				}
			}
			for start, g := range got {
				if _, ok := want[start]; !ok && start < rolled.cut(l) {
					t.Errorf("%s: %s/%s %v record at %s without readings: %+v", what, device, metric, l,
						time.Unix(0, start).UTC().Format(time.RFC3339), g)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// bruteStates is the time in state of readings (sorted, (time, id) order)
// over the groups of [from, to) at now (whole: one group), computed from
// the readings alone: each reading's state lasts until the next reading,
// the last one's until now; before the first reading the time is unknown.
func bruteStates(readings []aggregate.Sample, texts []string, level aggregate.Level, whole bool, from, to, now int64) []StatesAt {
	overlap := func(a, b, c, d int64) uint64 {
		lo, hi := max(a, c), min(b, d)
		if hi <= lo {
			return 0
		}
		return uint64(hi - lo)
	}
	var out []StatesAt
	groups := [][2]int64{{from, to}}
	if !whole {
		groups = nil
		for g := level.Truncate(from); g < to; g += int64(level.Duration()) {
			groups = append(groups, [2]int64{max(g, from), min(g+int64(level.Duration()), to)})
		}
	}
	for _, g := range groups {
		count := map[uint32]uint64{}
		dur := map[uint32]uint64{}
		at := StatesAt{Start: g[0]}
		if !whole {
			at.Start = level.Truncate(g[0])
		}
		first := int64(math.MaxInt64)
		if len(readings) > 0 {
			first = readings[0].TS
		}
		at.Unknown = overlap(g[0], g[1], math.MinInt64, min(first, now))
		for i, r := range readings {
			if r.TS >= g[0] && r.TS < g[1] {
				count[r.ID]++
				at.Count++
			}
			end := now
			if i+1 < len(readings) {
				end = readings[i+1].TS
			}
			dur[r.ID] += overlap(g[0], g[1], r.TS, end)
		}
		for id, text := range texts {
			id := uint32(id)
			if count[id] > 0 || dur[id] > 0 {
				at.States = append(at.States, StateTime{Text: text, Count: count[id], Dur: dur[id]})
			}
		}
		if whole || at.Count > 0 || len(at.States) > 0 {
			out = append(out, at)
		}
	}
	return out
}

// TestStates_MatchBruteForce writes scripted sequences of states across
// minute, hour and day boundaries through a Writer, late readings and
// duplicates included, with checkpoints and roll-ups at random moments in
// between, and checks at each step that the time in state by minute, hour,
// day and over whole ranges (whole minutes, at random) is that of a
// brute-force computation over the readings written, and at the end that
// every record is that of its raw readings.
func TestStates_MatchBruteForce(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 35} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 16})
			base := time.Date(2026, 3, 1, 21, 50, 0, 0, time.UTC).UnixNano()
			states := []string{"heat", "cool", "off", "auto", "eco"}
			// The script: readings a few seconds to 40 minutes apart over
			// some 30 hours, now and then two at one time.
			var script []Reading
			ts := base
			for len(script) < 250 {
				switch rng.IntN(4) {
				case 0:
					ts += rng.Int64N(int64(40 * time.Minute))
				case 1:
					ts += rng.Int64N(int64(3 * time.Minute))
				default:
					ts += rng.Int64N(int64(20 * time.Second))
				}
				script = append(script, textOf("d", "mode", ts, states[rng.IntN(len(states))]))
				if rng.IntN(15) == 0 {
					script = append(script, textOf("d", "mode", ts, states[rng.IntN(len(states))]))
				}
			}
			// Late readings: about one in six is held back and written
			// after a while.
			var late []Reading
			written := map[[2]any]bool{}
			var sent []Reading
			send := func(rs ...Reading) {
				res := write(t, w, rs...)
				fresh := 0
				for _, r := range rs {
					k := [2]any{r.TS, r.Text}
					if !written[k] {
						fresh++
						written[k] = true
						sent = append(sent, r)
					}
				}
				if res.Stored != fresh || res.Stored+res.Duplicates != len(rs) {
					t.Fatalf("write of %d: %+v, want %d stored", len(rs), res, fresh)
				}
			}
			check := func(step int) {
				t.Helper()
				texts := s.Texts("d", "mode")
				ids := map[string]uint32{}
				for i, x := range texts {
					ids[x] = uint32(i)
				}
				var raw []aggregate.Sample
				for _, r := range sent {
					raw = append(raw, aggregate.Sample{TS: r.TS, ID: ids[r.Text]})
				}
				slices.SortFunc(raw, func(a, b aggregate.Sample) int { return a.Compare(b) })
				lastTS := raw[len(raw)-1].TS
				now := lastTS + rng.Int64N(int64(2*time.Hour))
				lo := aggregate.Minute.Truncate(base) - int64(time.Hour)
				hi := aggregate.Minute.Truncate(lastTS) + int64(3*time.Hour)
				for range 3 {
					a := lo + rng.Int64N((hi-lo)/int64(time.Minute))*int64(time.Minute)
					b := a + (1+rng.Int64N((hi-a)/int64(time.Minute)))*int64(time.Minute)
					level := []aggregate.Level{aggregate.Minute, aggregate.Hour, aggregate.Day, 0}[rng.IntN(4)]
					whole := level == 0
					var got []StatesAt
					var err error
					if whole {
						var one StatesAt
						one, _, err = s.StatesCover("d", "mode", a, b, now)
						got = []StatesAt{one}
					} else {
						got, _, err = s.StatesByLevel("d", "mode", level, a, b, now)
					}
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					want := bruteStates(raw, texts, level, whole, a, b, now)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d: [%s, %s) by %v (whole %v), now %s:\ngot  %+v\nwant %+v", step,
							time.Unix(0, a).UTC().Format(time.RFC3339), time.Unix(0, b).UTC().Format(time.RFC3339), level, whole,
							time.Unix(0, now).UTC().Format(time.RFC3339), got, want)
					}
				}
			}
			step := 0
			for len(script) > 0 || len(late) > 0 {
				step++
				n := min(len(script), 1+rng.IntN(12))
				var batch []Reading
				for _, r := range script[:n] {
					if rng.IntN(6) == 0 {
						late = append(late, r)
					} else {
						batch = append(batch, r)
					}
				}
				script = script[n:]
				if len(late) > 0 && (rng.IntN(3) == 0 || len(script) == 0) {
					k := 1 + rng.IntN(len(late))
					batch = append(batch, late[:k]...)
					late = late[k:]
				}
				if len(sent) > 0 && rng.IntN(4) == 0 { // a resend: duplicates
					batch = append(batch, sent[rng.IntN(len(sent))])
				}
				if len(batch) > 0 {
					send(batch...)
				}
				switch rng.IntN(5) {
				case 0:
					checkpoint(t, w)
				case 1:
					if err := w.RollUp(context.Background(), time.Unix(0, base+rng.Int64N(ts-base+int64(24*time.Hour)))); err != nil {
						t.Fatal(err)
					}
				}
				if len(sent) > 0 && step%3 == 0 {
					check(step)
				}
			}
			check(step + 1)
			checkpoint(t, w)
			if err := w.RollUp(context.Background(), time.Unix(0, ts+int64(48*time.Hour))); err != nil {
				t.Fatal(err)
			}
			check(step + 2)
			checkStatesRecords(t, "end", s, "d", "mode")
			if r := s.rolled("d", "mode"); r.days <= base {
				t.Errorf("days rolled up to %s only", time.Unix(0, r.days).UTC())
			}
		})
	}
}

// A text series' records are States, under the same keys as a number's
// Stats; a number series' are untouched.
func TestStates_RecordsOfTextSeriesAreStates(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{})
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	write(t, w, textOf("d", "mode", base, "on"), textOf("d", "mode", base+1e9, "off"),
		Reading{Device: "d", Metric: "t", TS: base, Value: 1})
	checkpoint(t, w)
	err := s.db.View(func(txn *badger.Txn) error {
		for metric, states := range map[string]bool{"mode": true, "t": false} {
			item, err := txn.Get(encoding.AppendStatsKey(nil, aggregate.Minute, "d", metric, base))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if aggregate.IsStates(v) != states {
				t.Errorf("%s: minute record %x: IsStates %v, want %v", metric, v, !states, states)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.StatesCover("d", "mode", base, base+int64(time.Minute), base+int64(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := StatesAt{Start: base, Count: 2, States: []StateTime{{"on", 1, 1e9}, {"off", 1, 59e9}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StatesCover: %+v, want %+v", got, want)
	}
}

// A commit too large for one transaction is written in parts, each
// checkpointed when the next would not fit: the records of text series
// come out as those of their readings, late readings in a second large
// commit included.
func TestStates_CommitInParts(t *testing.T) {
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20}, WriterOptions{})
	base := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC).UnixNano()
	modes := []string{"heat", "cool", "off"}
	rng := rand.New(rand.NewPCG(9, 9))
	var first, second []Reading
	for d := range 20 {
		for i := range 540 {
			r := textOf(fmt.Sprintf("th-%d", d), "mode", base+int64(i)*20e9, modes[rng.IntN(len(modes))])
			if i%7 == 3 {
				r.TS += 7e9 // a late one, inside a minute already written
				second = append(second, r)
				continue
			}
			first = append(first, r)
		}
	}
	before := w.Stats().Checkpoints
	if res := write(t, w, first...); res.Stored != len(first) {
		t.Fatalf("first commit: %+v, want %d stored", res, len(first))
	}
	n := w.Stats().Checkpoints - before
	t.Logf("the first commit took %d checkpoints", n)
	if n < 3 {
		t.Fatalf("the commit took %d checkpoints: not written in parts", n)
	}
	if err := w.RollUp(context.Background(), time.Unix(0, base+int64(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if res := write(t, w, second...); res.Stored != len(second) {
		t.Fatalf("second commit: %+v, want %d stored", res, len(second))
	}
	checkpoint(t, w)
	for d := range 20 {
		checkStatesRecords(t, "in parts", s, fmt.Sprintf("th-%d", d), "mode")
	}
	texts := s.Texts("th-0", "mode")
	ids := map[string]uint32{}
	for i, x := range texts {
		ids[x] = uint32(i)
	}
	var raw []aggregate.Sample
	for _, r := range append(first, second...) {
		if r.Device == "th-0" {
			raw = append(raw, aggregate.Sample{TS: r.TS, ID: ids[r.Text]})
		}
	}
	slices.SortFunc(raw, func(a, b aggregate.Sample) int { return a.Compare(b) })
	from, to, now := base-int64(time.Hour), base+int64(4*time.Hour), base+int64(5*time.Hour)
	for _, l := range []aggregate.Level{aggregate.Minute, aggregate.Hour, aggregate.Day} {
		got, _, err := s.StatesByLevel("th-0", "mode", l, from, to, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteStates(raw, texts, l, false, from, to, now); !reflect.DeepEqual(got, want) {
			t.Errorf("by %v: got %+v\nwant %+v", l, got, want)
		}
	}
}

// Once retention has removed the raw readings before a range, the state
// the series was in when the range began comes from the records.
func TestStates_StateBeforeFromRecordsAfterRetention(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	states := []string{"open", "closed"}
	for h := range 10 * 24 {
		write(t, w, textOf("door", "contact", base+int64(h)*3600e9, states[h%2]))
	}
	checkpoint(t, w)
	if err := w.RollUp(ctx, time.Unix(0, base+11*day)); err != nil {
		t.Fatal(err)
	}
	if err := w.SealDue(ctx, time.Unix(0, base+11*day)); err != nil {
		t.Fatal(err)
	}
	if err := w.Prune(ctx, time.Unix(0, base+10*day+day/2)); err != nil {
		t.Fatal(err)
	}
	if n := s.ReadingCount(); n != 12 {
		t.Fatalf("raw readings after pruning: %d, want 12", n)
	}
	// The last reading pruned, at hour 227, closed the door; the first
	// left, at hour 228, opened it.
	from := base + 227*3600e9 + 1800e9
	got, _, err := s.StatesCover("door", "contact", from, from+3600e9, base+11*day)
	if err != nil {
		t.Fatal(err)
	}
	want := StatesAt{Start: from, Count: 1, States: []StateTime{{"open", 1, 1800e9}, {"closed", 0, 1800e9}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
