package aggregate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Sample is one reading of a text series: its time, in nanoseconds since
// the epoch, and its state, the series' id of its text.
//
// Samples are ordered by time, then by id (Compare): readings of a series
// with the same time hold their states in id order, so that each of them
// but the last lasts 0 ns.
type Sample struct {
	TS int64
	ID uint32
}

// Compare returns -1, 0 or +1 as a is before, equal to or after b in
// (time, id) order.
func (a Sample) Compare(b Sample) int {
	if c := cmp.Compare(a.TS, b.TS); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// StateStats is what a set of readings says of one state: how many of the
// readings are in that state, and for how long the series was in it.
type StateStats struct {
	// ID is the state's id in its series.
	ID uint32
	// Count is the number of readings in the state.
	Count uint64
	// Dur is the time in the state, in nanoseconds. As a time span of
	// int64 timestamps it may exceed math.MaxInt64 but never
	// math.MaxUint64, so it is exact.
	Dur uint64
}

// States is the aggregate of the readings of a text series within one
// time record (a minute, hour or day): the count of readings, the first
// and the last, and per state its count and the time spent in it between
// the first reading and the last. The zero States is empty: it summarizes
// no reading.
//
// A state lasts from its reading until the next reading of its series.
// Between First and Last that next reading is in the record, so PerState's
// durations add up exactly to Last.TS - First.TS. The time before First
// belongs to the state of a reading before the record, and the time after
// Last to Last's state until a reading after the record (or until now):
// neither is in the record, which therefore depends on the readings inside
// its period alone and never changes because of readings outside it.
// Merge and TimeIn add those times when records are put together.
//
// A States holds one entry per distinct state among its readings, so its
// size is bounded by the number of states its series may have. Its methods
// change PerState in place: a copy of a States shares it until Clone.
type States struct {
	// Count is the number of readings, the sum of PerState's counts.
	Count uint64
	// First and Last are the first and the last reading in (time, id)
	// order. They are meaningless (and zero) while Count is 0.
	First, Last Sample
	// PerState holds an entry for each state with a reading, in
	// increasing ID order; each Count is at least 1.
	PerState []StateStats
}

// IsEmpty reports whether s summarizes no reading.
func (s States) IsEmpty() bool { return s.Count == 0 }

// Clone returns a copy of s that shares no memory with it.
func (s States) Clone() States {
	s.PerState = slices.Clone(s.PerState)
	return s
}

// span returns b - a for a ≤ b, exactly, as a uint64.
func span(a, b int64) uint64 { return uint64(b) - uint64(a) }

// entry returns the entry of state id in s.PerState, adding an empty one in
// its place if there is none.
func (s *States) entry(id uint32) *StateStats {
	i, ok := slices.BinarySearchFunc(s.PerState, id, func(e StateStats, id uint32) int {
		return cmp.Compare(e.ID, id)
	})
	if !ok {
		s.PerState = slices.Insert(s.PerState, i, StateStats{ID: id})
	}
	return &s.PerState[i]
}

// Add adds the reading r to s if it can be added on its own, and reports
// whether it did. It can when s is empty, when r is at or after s.Last
// (the common case: readings in time order), and when r is at or before
// s.First, all in (time, id) order. A reading between First and Last
// changes the time of the state it interrupts, which s does not know:
// Add returns false and leaves s as it is, and the record must be built
// again from its readings with FromSamples.
//
// Add does not look for duplicates: a reading equal to First or Last is
// counted again (and lasts 0 ns).
func (s *States) Add(r Sample) bool {
	switch {
	case s.Count == 0:
		*s = States{First: r, Last: r, PerState: append(s.PerState[:0], StateStats{ID: r.ID})}
	case r.Compare(s.Last) >= 0:
		s.entry(s.Last.ID).Dur += span(s.Last.TS, r.TS)
		s.Last = r
	case r.Compare(s.First) <= 0:
		s.entry(r.ID).Dur += span(r.TS, s.First.TS)
		s.First = r
	default:
		return false
	}
	s.Count++
	s.entry(r.ID).Count++
	return true
}

// FromSamples returns the States of the readings samples, which it sorts
// in (time, id) order in place unless they are sorted already. The store
// builds a record with it when a late reading cannot be added (Add).
func FromSamples(samples []Sample) States {
	cmpSamples := func(a, b Sample) int { return a.Compare(b) }
	if !slices.IsSortedFunc(samples, cmpSamples) {
		slices.SortFunc(samples, cmpSamples)
	}
	var s States
	for _, r := range samples {
		s.Add(r) // at or after Last: always added
	}
	return s
}

// ErrStatesOrder is wrapped by the errors of Merge and TimeIn for
// records that are not in time order or not within the range asked.
var ErrStatesOrder = errors.New("states out of order")

// Merge adds to s the readings summarized by later, which must all be at
// or after s's (later.First not before s.Last, in (time, id) order): the
// records of consecutive periods, merged in time order, give the record of
// their union, exactly. The time between s.Last and later.First is
// Last's state's. Merging an empty States is a no-op; merging into an
// empty one copies later. If later is not after s, Merge returns an error
// wrapping ErrStatesOrder and leaves s as it is. s never shares memory
// with later.
func (s *States) Merge(later States) error {
	switch {
	case later.Count == 0:
		return nil
	case s.Count == 0:
		*s = States{Count: later.Count, First: later.First, Last: later.Last,
			PerState: append(s.PerState[:0], later.PerState...)}
		return nil
	case later.First.Compare(s.Last) < 0:
		return fmt.Errorf("%w: merging readings from %d after one at %d", ErrStatesOrder, later.First.TS, s.Last.TS)
	}
	s.entry(s.Last.ID).Dur += span(s.Last.TS, later.First.TS)
	s.Count += later.Count
	s.Last = later.Last
	s.PerState = mergeStates(s.PerState, later.PerState)
	return nil
}

// mergeStates adds the entries of b into a, both in ID order, and returns
// the extended a.
func mergeStates(a, b []StateStats) []StateStats {
	n := len(a)
	for _, e := range b { // new states go at the end, then all is sorted
		i, ok := slices.BinarySearchFunc(a[:n], e.ID, func(x StateStats, id uint32) int {
			return cmp.Compare(x.ID, id)
		})
		if ok {
			a[i].Count += e.Count
			a[i].Dur += e.Dur
		} else {
			a = append(a, e)
		}
	}
	if len(a) > n {
		slices.SortFunc(a, func(x, y StateStats) int { return cmp.Compare(x.ID, y.ID) })
	}
	return a
}

// Prior is the state a series is in at a given time: that of its last
// reading before then, if it has one. The zero Prior is no state: no
// reading came before.
type Prior struct {
	ID    uint32
	Known bool
}

// Carry returns the state the series is in after the readings of s when
// it was in state in before them: that of s.Last, or in if s is empty.
func (s States) Carry(in Prior) Prior {
	if s.Count == 0 {
		return in
	}
	return Prior{ID: s.Last.ID, Known: true}
}

// StateQuery asks for the time in each state of a series over a range.
type StateQuery struct {
	// From and To bound the range [From, To), in nanoseconds since the
	// epoch.
	From, To int64
	// Now is the time of the query: the last reading of the series lasts
	// until Now.
	Now int64
	// Before is the state the series is in at From: that of its last
	// reading before From (the Last of the newest record before From), or
	// no state if it has none.
	Before Prior
	// ReadingAfter reports whether the series has a reading at or after
	// To. The state in force at To then lasts until To at least, even if
	// Now is earlier (a reading dated ahead of the clock).
	ReadingAfter bool
}

// TimeInState is the answer to a StateQuery.
type TimeInState struct {
	// Count is the number of readings in the range.
	Count uint64
	// PerState holds, in increasing ID order, each state with a reading
	// in the range or some of the range's time: its readings in the range
	// and its time within the range.
	PerState []StateStats
	// Unknown is the time of the range before the first reading of the
	// series, in no state.
	Unknown uint64
}

// TimeIn answers q from s, the States of exactly the readings of the
// series in [q.From, q.To): the records of whole minutes, hours and days
// (Cover) and those of the raw readings at the ends, merged in time order.
//
// A state lasts from its reading until the next reading of the series,
// and the last reading's until q.Now; each state's time is that of its
// spans within [q.From, q.To). So the state in force at From (q.Before)
// lasts until s.First; each state's time between s.First and s.Last is
// s's; s.Last's state lasts until To, or until Now if that is earlier and
// the series has no reading after the range. The time before the series'
// first reading is Unknown. When Now is not before To, the times of the
// states and Unknown add up to To - From.
//
// TimeIn returns an error wrapping ErrStatesOrder if s has a reading
// outside [q.From, q.To). It returns zero for an empty range.
func (s States) TimeIn(q StateQuery) (TimeInState, error) {
	if q.From >= q.To {
		if s.Count > 0 {
			return TimeInState{}, fmt.Errorf("%w: readings in the empty range [%d, %d)", ErrStatesOrder, q.From, q.To)
		}
		return TimeInState{}, nil
	}
	if s.Count > 0 && (s.First.TS < q.From || s.Last.TS >= q.To) {
		return TimeInState{}, fmt.Errorf("%w: readings from %d to %d, range [%d, %d)",
			ErrStatesOrder, s.First.TS, s.Last.TS, q.From, q.To)
	}
	// The last state in the range lasts until end at most.
	end := q.To
	if !q.ReadingAfter {
		end = min(q.To, q.Now)
	}
	res := TimeInState{Count: s.Count, PerState: slices.Clone(s.PerState)}
	out := States{PerState: res.PerState} // entry() on the result's states
	// Before s.First, or over the whole range if s is empty: the state
	// carried in, or no state.
	head := uint64(0)
	if s.Count > 0 {
		head = span(q.From, s.First.TS)
	} else if end > q.From {
		head = span(q.From, end)
	}
	if head > 0 {
		if q.Before.Known {
			out.entry(q.Before.ID).Dur += head
		} else {
			res.Unknown = head
		}
	}
	if s.Count > 0 && end > s.Last.TS {
		out.entry(s.Last.ID).Dur += span(s.Last.TS, end)
	}
	res.PerState = out.PerState
	return res, nil
}
