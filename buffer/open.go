package buffer

import (
	"bytes"
	"fmt"
	"iter"
	"slices"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// Open points are stored in runs. A checkpoint of the journal (journal.go)
// writes the new readings of a series-day as one run (more when there are
// more than runMax): one point key, that of the run's first sample, whose
// value is the run's samples encoded as a bucket, or empty for a run of one
// reading. A busy series thus costs one key per checkpoint instead of one
// per reading, and sealing it deletes a few runs instead of every reading.
//
// Runs of a series-day may overlap in time. In memory, a series keeps the
// open samples of each day run after run (openDay.points), each run
// sorted, with the length of each run (openDay.runs), so that what
// removes open points (sealing, retention, repair) knows the runs it
// deletes and the runs it must write again for the points they keep.

// openDay is the open points of one UTC day of a series. A series keeps
// them in a slice, not a map by day: it has one day open most of the
// time, two around midnight, and none once sealed, and two maps with one
// day each took some 580 bytes a series (BenchmarkSeriesMemory).
type openDay struct {
	day    int32
	runs   []uint16 // the length of each run in points, in order
	points []Sample // committed points not yet sealed, run after run
}

// days yields each day of the series that has open points, with them.
// The series must not change until the loop ends.
func (st *seriesWork) days() iter.Seq2[int32, []Sample] {
	return func(yield func(int32, []Sample) bool) {
		for i := range st.open {
			if !yield(st.open[i].day, st.open[i].points) {
				return
			}
		}
	}
}

// openOf returns the open day of the series, nil if it has no open points
// that day.
func (st *seriesWork) openOf(day int32) *openDay {
	for i := range st.open {
		if st.open[i].day == day {
			return &st.open[i]
		}
	}
	return nil
}

// points returns the open points of a day of the series.
func (st *seriesWork) points(day int32) []Sample {
	if d := st.openOf(day); d != nil {
		return d.points
	}
	return nil
}

// runMax returns the most samples a run holds: a bucket's worth at most, and
// no more than fit in a value the store takes, at worst.
func (s *Store) runMax() int {
	return max(1, min(MaxBucketSamples, (s.maxValue-encoding.RunHeaderMax)/encoding.RunSampleMax))
}

// runEntry returns the key and value of a run of sorted samples
// (encoding.AppendRun).
func runEntry(st *seriesState, run []Sample) (kv, error) {
	key := encoding.AppendPointKey(nil, Reading{Device: st.device, Metric: st.metric, TS: run[0].TS, Value: run[0].Value})
	val, err := encoding.AppendRun(nil, run)
	if err != nil {
		return kv{}, fmt.Errorf("run %q: %w", key, err)
	}
	return kv{key: key, value: val}, nil
}

// forRuns calls fn with the runs a commit writes for samples sorted by
// compareSamples: those of each UTC day, at most limit to a run.
func forRuns(samples []Sample, limit int, fn func(day int32, run []Sample) error) error {
	for len(samples) > 0 {
		day := encoding.DayOf(samples[0].TS)
		n := 1
		for n < len(samples) && n < limit && encoding.DayOf(samples[n].TS) == day {
			n++
		}
		if err := fn(day, samples[:n]); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}

// runChange is what removing points from one run takes: deleting the run
// (unless the points it keeps are written under the same key) and writing
// the points it keeps as a new run.
type runChange struct {
	old     []byte // the run's key
	removed int    // points removed
	keep    kv     // the run of the points kept (key nil: none)
}

// openEdit is the plan of removing some open points of a series-day.
type openEdit struct {
	st      *seriesState
	day     int32
	changes []runChange
	open    []Sample // the day's open points after
	runs    []uint16 // and its runs
	removed int
}

// planDrop plans removing the open points of a series-day for which drop
// reports true. It changes nothing; apply does, once the plan is
// committed.
func (st *seriesState) planDrop(day int32, drop func(Sample) bool) (openEdit, error) {
	e := openEdit{st: st, day: day}
	var open []Sample
	var runs []uint16
	if d := st.openOf(day); d != nil {
		open, runs = d.points, d.runs
	}
	off := 0
	for _, l := range runs {
		n := int(l)
		run := open[off : off+n]
		off += n
		start := len(e.open)
		for _, p := range run {
			if !drop(p) {
				e.open = append(e.open, p)
			}
		}
		kept := e.open[start:]
		if len(kept) == n {
			e.runs = append(e.runs, l)
			continue
		}
		c := runChange{old: encoding.AppendPointKey(nil, Reading{Device: st.device, Metric: st.metric, TS: run[0].TS, Value: run[0].Value}), removed: n - len(kept)}
		if len(kept) > 0 {
			var err error
			if c.keep, err = runEntry(st, kept); err != nil {
				return openEdit{}, err
			}
			e.runs = append(e.runs, uint16(len(kept)))
		}
		e.changes = append(e.changes, c)
		e.removed += c.removed
	}
	return e, nil
}

// dels appends the keys the edit deletes to dst.
func (e *openEdit) dels(dst [][]byte) [][]byte {
	for _, c := range e.changes {
		if c.keep.key == nil || !bytes.Equal(c.keep.key, c.old) {
			dst = append(dst, c.old)
		}
	}
	return dst
}

// sets appends the runs the edit writes to dst.
func (e *openEdit) sets(dst []kv) []kv {
	for _, c := range e.changes {
		if c.keep.key != nil {
			dst = append(dst, c.keep)
		}
	}
	return dst
}

// apply brings the series' open points up to date with the committed edit.
func (e *openEdit) apply() {
	st := e.st
	i := slices.IndexFunc(st.open, func(d openDay) bool { return d.day == e.day })
	switch {
	case len(e.open) == 0 && i >= 0:
		st.open = slices.Delete(st.open, i, i+1)
		if len(st.open) == 0 {
			st.open = nil // a sealed series keeps no slice
		}
	case len(e.open) == 0:
	case i >= 0:
		// Into the day's own arrays: the next checkpoints append their
		// runs there, and a busy series fills them again at once (only
		// the Writer's goroutine reads open points).
		d := &st.open[i]
		d.points = append(d.points[:0], e.open...)
		d.runs = append(d.runs[:0], e.runs...)
	default:
		st.open = append(st.open, openDay{day: e.day, runs: e.runs, points: e.open})
	}
}

// addRun adds a committed run of sorted samples to the open points of its
// day.
func (st *seriesWork) addRun(day int32, run []Sample) {
	d := st.openOf(day)
	if d == nil {
		st.open = append(st.open, openDay{day: day})
		d = &st.open[len(st.open)-1]
	}
	d.points = append(d.points, run...)
	d.runs = append(d.runs, uint16(len(run))) // a bucket's worth at most
}

// hasOpen reports whether the sample is an open point of the series, in
// the journal, or one of the commit under way.
func (st *seriesWork) hasOpen(smp Sample) bool {
	return slices.ContainsFunc(st.points(encoding.DayOf(smp.TS)), smp.Same) ||
		slices.ContainsFunc(st.unflushed, smp.Same) || slices.ContainsFunc(st.pend, smp.Same)
}
