package buffer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The latest reading of a series is not kept in memory: a series costs
// its bytes for as long as the store holds it (BenchmarkSeriesMemory).
// The index knows the newest timestamp of each series (seriesState.last),
// and the reading at that time is read through the queries' own path,
// which sees the journal (checkpointed first), the open runs and the
// sealed buckets alike.

// Latest returns the newest reading of each series of the devices named,
// with its unit (Reading.Unit, "" when not known), sorted by device, then
// metric. A series whose raw readings retention has removed has none. Of
// two readings with the newest timestamp, it returns the one a query
// newest first returns first.
func (s *Store) Latest(devices ...string) ([]Reading, error) {
	if len(devices) == 0 {
		return nil, nil
	}
	want := make(map[string]bool, len(devices))
	for _, d := range devices {
		want[d] = true
	}
	return s.latest(func(device string) bool { return want[device] })
}

// LatestAll returns the newest reading of every series of the store, as
// Latest does for some devices.
func (s *Store) LatestAll() ([]Reading, error) {
	return s.latest(func(string) bool { return true })
}

// latest returns the newest reading of each series whose device is
// wanted. It notes each series' newest timestamp before it has the
// Writer checkpoint, so that the reading at that time is out of the
// journal when it reads it.
func (s *Store) latest(wanted func(device string) bool) ([]Reading, error) {
	var newest []Reading // Value unset: what to read
	s.mu.RLock()
	for _, st := range s.series {
		if st.last != math.MinInt64 && wanted(st.device) {
			newest = append(newest, Reading{Device: st.device, Metric: st.metric, TS: st.last, Unit: st.unitName()})
		}
	}
	s.mu.RUnlock()
	if len(newest) == 0 {
		return nil, nil
	}
	slices.SortFunc(newest, func(a, b Reading) int {
		if c := strings.Compare(a.Device, b.Device); c != 0 {
			return c
		}
		return strings.Compare(a.Metric, b.Metric)
	})
	if err := s.flushJournal(); err != nil {
		return nil, fmt.Errorf("latest readings: %w", err)
	}
	out := newest[:0]
	err := s.db.View(func(txn *badger.Txn) error {
		for _, r := range newest {
			got, ok, err := s.latestOf(txn, r)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, got)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("latest readings: %w", err)
	}
	return out, nil
}

// latestOf reads the newest reading of r's series within txn: the one at
// r.TS, the series' newest timestamp when latest looked. If that one is
// gone (retention removed it meanwhile), it is the newest left. It
// reports whether the series has one.
func (s *Store) latestOf(txn *badger.Txn, r Reading) (Reading, bool, error) {
	q := Query{Device: r.Device, Metric: r.Metric, From: r.TS, To: r.TS + 1, Desc: true, Limit: 1}
	if r.TS == math.MaxInt64 { // no query names the last nanosecond
		q.To = r.TS
	}
	got, ok := Reading{}, false
	take := func(rd Reading) bool {
		rd.Unit = r.Unit
		got, ok = rd, true
		return false
	}
	if err := s.scan(txn, q, take); err != nil || ok {
		return got, ok, err
	}
	q.From, q.To = math.MinInt64, math.MaxInt64
	err := s.scan(txn, q, take)
	return got, ok, err
}
