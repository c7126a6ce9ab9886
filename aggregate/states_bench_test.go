package aggregate

import (
	"testing"
	"time"
)

// benchDay is the start of the UTC day the benchmarks' readings are in.
var benchDay = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).UnixNano()

// everyN returns the readings of a series whose state changes every step
// from start for length, cycling through states ids, each at a jittered
// time (so times are not round).
func everyN(start int64, length, step time.Duration, states uint32) []Sample {
	var out []Sample
	for i := int64(0); int64(i)*int64(step) < int64(length); i++ {
		ts := start + i*int64(step) + (i*7919%1000)*int64(time.Millisecond)
		out = append(out, Sample{TS: ts, ID: uint32(i) % states})
	}
	return out
}

// rolled returns the record of level l holding the readings in, built as
// the store builds it: minute records by Add, folded into hours, folded
// into the day.
func rolled(l Level, in []Sample) States {
	minutes := map[int64]*States{}
	var order []int64
	for _, r := range in {
		m := Minute.Truncate(r.TS)
		if minutes[m] == nil {
			minutes[m] = &States{}
			order = append(order, m)
		}
		minutes[m].Add(r)
	}
	var hours []States
	for _, m := range order {
		if len(hours) == 0 || Hour.Truncate(hours[len(hours)-1].Last.TS) != Hour.Truncate(m) {
			hours = append(hours, States{})
		}
		if err := hours[len(hours)-1].Merge(*minutes[m]); err != nil {
			panic(err)
		}
	}
	var out States
	switch l {
	case Minute:
		return *minutes[order[0]]
	case Hour:
		return hours[0]
	}
	for _, h := range hours {
		if err := out.Merge(h); err != nil {
			panic(err)
		}
	}
	return out
}

// BenchmarkStates_Bytes reports the size of a record (bytes/record) for a
// few kinds of text series, and the time to encode it.
func BenchmarkStates_Bytes(b *testing.B) {
	button := []Sample{} // a button pressed 40 times a day: single, double, hold
	for i := range 40 {
		button = append(button, Sample{benchDay + int64(i)*int64(35*time.Minute) + int64(i*i)*int64(time.Second), uint32(i*i) % 3})
	}
	for _, bc := range []struct {
		name string
		rec  States
	}{
		{"minute/one reading", rolled(Minute, everyN(benchDay, time.Minute, time.Minute, 3))},
		{"minute/every 5s, 3 states", rolled(Minute, everyN(benchDay, time.Minute, 5*time.Second, 3))},
		{"hour/a change every 3 min, 3 states", rolled(Hour, everyN(benchDay, time.Hour, 3*time.Minute, 3))},
		{"day/a change every 3 min, 3 states", rolled(Day, everyN(benchDay, 24*time.Hour, 3*time.Minute, 3))},
		{"day/a change every 3 min, 64 states", rolled(Day, everyN(benchDay, 24*time.Hour, 3*time.Minute, 64))},
		{"day/button, 40 events, 3 kinds", rolled(Day, button)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := bc.rec.Append(nil)
			for b.Loop() {
				buf = bc.rec.Append(buf[:0])
			}
			b.ReportMetric(float64(len(buf)), "bytes/record")
		})
	}
}

// BenchmarkStates_Add adds readings in time order to minute records, a
// reading every second cycling through 3 states: the cost per reading of
// keeping the current minute's record.
func BenchmarkStates_Add(b *testing.B) {
	var s States
	i := int64(0)
	for b.Loop() {
		if i%60 == 0 {
			s.Count = 0 // a new minute's record, in the same memory
		}
		s.Add(Sample{TS: benchDay + i*int64(time.Second), ID: uint32(i % 3)})
		i++
	}
}

// BenchmarkStates_RollUpHour folds 60 minute records of 3 states into an
// hour record: the cost of one roll-up.
func BenchmarkStates_RollUpHour(b *testing.B) {
	in := everyN(benchDay, time.Hour, 5*time.Second, 3)
	var minutes []States
	for m := range 60 {
		minutes = append(minutes, FromSamples(in[m*12:(m+1)*12]))
	}
	var h States
	for b.Loop() {
		h.Count = 0
		for _, m := range minutes {
			if err := h.Merge(m); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkStates_FromSamples builds a minute record from 60 sorted
// readings of 3 states, as for a late reading.
func BenchmarkStates_FromSamples(b *testing.B) {
	in := everyN(benchDay, time.Minute, time.Second, 3)
	for b.Loop() {
		FromSamples(in)
	}
}

// BenchmarkDecodeStates decodes a day record of 3 states.
func BenchmarkDecodeStates(b *testing.B) {
	buf := rolled(Day, everyN(benchDay, 24*time.Hour, 3*time.Minute, 3)).Append(nil)
	for b.Loop() {
		if _, err := DecodeStates(buf); err != nil {
			b.Fatal(err)
		}
	}
}
