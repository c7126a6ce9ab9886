package buffer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Queries do not checkpoint the journal. The running Writer holds what
// the next checkpoint will write: the readings of the journal
// (seriesWork.unflushed), which become runs of open points, and their
// aggregates (checkpointState.deltas), which are merged into records. A
// query takes a copy of those for the series and the time range it reads,
// with the series' roll-up marks and its read transaction, in one step on
// the Writer's goroutine, where checkpoints, roll-ups and prunes run: none
// can come between them, so every reading is seen exactly once. It then
// reads as if the checkpoint had been written: the readings join the open
// points of their series, and each aggregate is merged into its record as
// the checkpoint would merge it. A dashboard or a client polling the API
// every few seconds costs no write. The answer is the one a checkpoint
// would give before the hours it completes are rolled up (a sum of hour
// records adds in another order than their minutes: the last bits may
// differ).

// unflushed is what a query reads of the journal, for the series of one
// device, with their roll-up marks. A nil *unflushed is an empty journal.
type unflushed struct {
	samples map[string][]Sample              // by metric, in the order committed
	deltas  map[unflushedKey]aggregate.Stats // what each record gains
	rolled  map[string]rolledTo              // by metric
}

type unflushedKey struct {
	metric string
	level  aggregate.Level
	start  int64
}

// samplesOf returns the readings of metric in [from, to).
func (j *unflushed) samplesOf(metric string, from, to int64) []Sample {
	if j == nil {
		return nil
	}
	var out []Sample
	for _, s := range j.samples[metric] {
		if s.TS >= from && s.TS < to {
			out = append(out, s)
		}
	}
	return out
}

// deltasOf returns what the records of a level of metric that start in
// [from, to) gain, by start, oldest first.
func (j *unflushed) deltasOf(metric string, level aggregate.Level, from, to int64) []StatsAt {
	if j == nil {
		return nil
	}
	var out []StatsAt
	for k, d := range j.deltas {
		if k.metric == metric && k.level == level && k.start >= from && k.start < to {
			out = append(out, StatsAt{Start: k.start, Stats: d})
		}
	}
	slices.SortFunc(out, func(a, b StatsAt) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// span is what a query reads: the series of device named in metrics, in
// [from, to), and whether it reads records (the aggregates of the
// journal) or readings alone.
type span struct {
	device   string
	metrics  []string
	from, to int64
	records  bool
}

// rolledOf returns the roll-up marks of the series of sp, read now:
// before the transaction that uses them is opened, as rolled requires.
func (s *Store) rolledOf(sp span) *unflushed {
	j := &unflushed{rolled: make(map[string]rolledTo, len(sp.metrics))}
	for _, m := range sp.metrics {
		j.rolled[m] = s.rolled(sp.device, m)
	}
	return j
}

// unflushedOf copies, on the Writer's goroutine, what the journal holds
// of sp, and the roll-up marks of its series.
func (w *Writer) unflushedOf(sp span) *unflushed {
	j := w.store.rolledOf(sp)
	j.samples = map[string][]Sample{}
	j.deltas = map[unflushedKey]aggregate.Stats{}
	s := w.store
	for _, m := range sp.metrics {
		s.mu.RLock()
		st := s.series[seriesID(sp.device, m)]
		s.mu.RUnlock()
		if st == nil || len(st.unflushed) == 0 {
			continue
		}
		var last [len(allLevels)]int64 // the record looked up last, per level
		for _, smp := range st.unflushed {
			if smp.TS < sp.from || smp.TS >= sp.to {
				continue
			}
			j.samples[m] = append(j.samples[m], smp)
			if !sp.records {
				continue
			}
			for i, l := range allLevels {
				start := l.Truncate(smp.TS)
				if len(j.samples[m]) > 1 && start == last[i] {
					continue
				}
				last[i] = start
				if d, ok := w.ckpt.deltas[statKey{l, st, start}]; ok {
					j.deltas[unflushedKey{m, l, start}] = d
				}
			}
		}
	}
	return j
}

// view calls fn with a read transaction of the store and what the journal
// holds of sp, taken together (see above). With no Writer running, the
// journal is empty. A Writer that is stopping checkpoints its journal
// last: view waits for that.
func (s *Store) view(sp span, fn func(txn *badger.Txn, j *unflushed) error) error {
	w := s.runningWriter()
	if w == nil {
		j := s.rolledOf(sp)
		return s.db.View(func(txn *badger.Txn) error { return fn(txn, j) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	// The step may run after do gave up (ctx ended): then no one reads
	// what it took, and it must discard the transaction itself.
	var taken struct {
		sync.Mutex
		txn       *badger.Txn
		j         *unflushed
		abandoned bool
	}
	err := w.do(ctx, func() error {
		txn := s.db.NewTransaction(false)
		j := w.unflushedOf(sp)
		taken.Lock()
		defer taken.Unlock()
		if taken.abandoned {
			txn.Discard()
			return nil
		}
		taken.txn, taken.j = txn, j
		return nil
	})
	if err != nil {
		taken.Lock()
		taken.abandoned = true
		if taken.txn != nil {
			taken.txn.Discard()
		}
		taken.Unlock()
		if !errors.Is(err, ErrClosed) {
			return fmt.Errorf("reading the journal: %w", err)
		}
		select {
		case <-w.stopped:
		case <-ctx.Done():
			return fmt.Errorf("reading the journal: %w", ctx.Err())
		}
		j := s.rolledOf(sp)
		return s.db.View(func(txn *badger.Txn) error { return fn(txn, j) })
	}
	defer taken.txn.Discard()
	return fn(taken.txn, taken.j)
}
