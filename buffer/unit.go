package buffer

import (
	"fmt"
	"unique"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Units. A reading may name the unit of its series (Reading.Unit); the
// store keeps one unit per series, the last one a stored reading brought,
// under
//
//	'u' device 0x00 metric 0x00 → the unit
//
// written in the transaction of the group commit part whose journal entry
// holds that reading: a unit is exactly as durable as the reading that
// brought it, and a crash can lose neither without the other. The key is
// written only when a series' unit changes, never per reading. A reading
// without a unit, a duplicate and a refused reading change nothing; a
// unit that is not valid (encoding.ValidUnit) is dropped, and the series keeps the
// unit it had.
//
// In memory a series holds its unit as a unique.Handle: distinct units
// are few, each is kept once, and a handle takes 8 bytes, which the
// series' state had room for in its size class (BenchmarkSeriesMemory).
//
// Open loads the units of the series it finds (after the journal's
// replay, which may add series) and deletes the keys of series it does
// not find: the index drops a series whose readings were all pruned when
// the store is next opened, and its unit goes with it.

// unitName returns the unit of a series ("" when not known). The caller
// holds Store.mu, or is the Writer's goroutine.
func (st *seriesIndex) unitName() string {
	if st.unit == (unique.Handle[string]{}) {
		return ""
	}
	return st.unit.Value()
}

// Unit returns the unit of a series, "" when the store knows none or has
// no such series.
func (s *Store) Unit(device, metric string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if st := s.series[seriesID(device, metric)]; st != nil {
		return st.unitName()
	}
	return ""
}

// fillUnits sets the Unit of each of rs to the unit its series has now.
func (s *Store) fillUnits(rs []OutboxReading) {
	if len(rs) == 0 {
		return
	}
	var id []byte
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := range rs {
		r := &rs[i]
		id = append(append(append(id[:0], r.Device...), encoding.Sep), r.Metric...)
		r.Unit = ""
		if st := s.series[string(id)]; st != nil {
			r.Unit = st.unitName()
		}
	}
}

// unitChange returns the unit to record for st when a reading of it that
// is being stored names unit, and whether that changes the unit st has,
// committed or in the part under way.
func (w *Writer) unitChange(st *seriesState, unit string) (unique.Handle[string], bool) {
	var none unique.Handle[string]
	if unit == "" {
		return none, false
	}
	cur := st.unit
	if len(w.units) > 0 {
		if u, ok := w.units[st]; ok {
			cur = u
		}
	}
	if cur != none && cur.Value() == unit {
		return cur, false
	}
	if !encoding.ValidUnit(unit) {
		return none, false
	}
	return unique.Make(unit), true
}

// unitEntrySize is what the key and value of st's unit take in a
// transaction (with Badger's metadata, as txnBudget.take counts it).
func unitEntrySize(st *seriesState, unit unique.Handle[string]) int64 {
	return int64(1+len(st.device)+1+len(st.metric)+1+len(unit.Value())) + 2
}

// setUnit writes the unit of st in txn, the part under way, which
// publishes it to the index once committed (journaled).
func (w *Writer) setUnit(txn *badger.Txn, st *seriesState, unit unique.Handle[string]) error {
	if err := txn.Set(encoding.AppendUnitKey(nil, st.device, st.metric), []byte(unit.Value())); err != nil {
		return fmt.Errorf("unit of %q %q: %w", st.device, st.metric, err)
	}
	w.units[st] = unit
	return nil
}

// loadUnits gives the series of the index the units stored for them, and
// deletes the units of series that are not in it, as well as keys and
// values that are not those of a unit. The deletes are not synced (lost,
// they come again at the next Open), and a failure to delete is logged,
// not returned: the store must open on a full disk.
func (s *Store) loadUnits() error {
	var drop [][]byte
	loaded := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindUnit)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			device, metric, err := encoding.ParseUnitKey(item.Key())
			var st *seriesState
			if err == nil {
				st = s.series[seriesID(device, metric)]
			}
			if st == nil {
				drop = append(drop, item.KeyCopy(nil))
				continue
			}
			var unit string
			if err := item.Value(func(v []byte) error { unit = string(v); return nil }); err != nil {
				return fmt.Errorf("unit %q: %w", item.Key(), err)
			}
			if !encoding.ValidUnit(unit) {
				s.log.Warn("a stored unit is not valid; the series has none", "device", device, "metric", metric, "unit", unit)
				drop = append(drop, item.KeyCopy(nil))
				continue
			}
			st.unit = unique.Make(unit)
			loaded++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load units: %w", err)
	}
	if len(drop) == 0 {
		return nil
	}
	if err := s.deleteKeys(drop); err != nil {
		s.log.Warn("could not delete the units of series no longer stored; trying again at the next start", "units", len(drop), "err", err)
		return nil
	}
	s.log.Info("deleted the units of series no longer stored", "units", len(drop), "loaded", loaded)
	return nil
}

// deleteKeys deletes keys in one write batch, not synced: loadUnits and
// loadHeard drop what Open found stale, which the next Open finds again
// if the deletes are lost.
func (s *Store) deleteKeys(keys [][]byte) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}
