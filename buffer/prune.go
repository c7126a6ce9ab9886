package buffer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/cairn-gateway/cairn/aggregate"
)

// pruneEvery is how often the Writer prunes aggregate records.
const pruneEvery = time.Hour

// ErrClockBehind is returned by PruneStats while the clock is before the
// newest reading stored: a board without a real-time clock boots with a
// wrong date until NTP sets it, and pruning by that date would be wrong.
var ErrClockBehind = errors.New("clock is before the newest reading stored: retention paused")

// pruneStats deletes the aggregate records that started before their
// level's retention at now. Used by the Run goroutine only.
func (w *Writer) pruneStats(now time.Time) error {
	if len(w.opts.StatsMaxAge) == 0 {
		return nil
	}
	newest := int64(math.MinInt64)
	for _, st := range w.store.series { // only this goroutine writes the map
		newest = max(newest, st.last)
	}
	if now.UnixNano() < newest {
		return fmt.Errorf("%w (clock %s, newest reading %s)", ErrClockBehind, now.UTC().Format(time.RFC3339), time.Unix(0, newest).UTC().Format(time.RFC3339))
	}
	snap := w.store.db.NewTransaction(false)
	defer snap.Discard()
	var keys [][]byte
	for _, st := range w.store.series {
		for _, l := range levels() {
			age := w.opts.StatsMaxAge[l]
			if age <= 0 {
				continue
			}
			cutoff := now.Add(-age).UnixNano()
			if c := &st.stats[l-aggregate.Minute]; c.Start < cutoff {
				*c = StatsAt{} // about to be deleted: forget it
			}
			prefix := appendStatsPrefix(nil, l, st.device, st.metric)
			it := snap.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				if len(k) != len(prefix)+8 || decodeTS(k[len(prefix):]) >= cutoff {
					break
				}
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
	}
	return w.deleteKeys(keys)
}

// deleteKeys deletes keys in as few transactions as Badger takes.
func (w *Writer) deleteKeys(keys [][]byte) error {
	for len(keys) > 0 {
		txn := w.store.db.NewTransaction(true)
		budget := newTxnBudget(w.store.db, 0)
		n := 0
		for ; n < len(keys) && budget.take(keys[n], nil); n++ {
			if err := txn.Delete(keys[n]); err != nil {
				txn.Discard()
				return err
			}
		}
		if err := txn.Commit(); err != nil {
			txn.Discard()
			return err
		}
		w.pruned.Add(uint64(n))
		keys = keys[n:]
	}
	return nil
}
