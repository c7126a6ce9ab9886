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
// query takes a copy of those for the series it reads, and its read
// transaction, in one step on the Writer's goroutine, where checkpoints
// run: no checkpoint can come between the two, so every reading is seen
// exactly once. It then reads as if the checkpoint had been written: the
// readings join the open points of their series, and each aggregate is
// merged into its record as the checkpoint would merge it. A dashboard or
// a client polling the API every few seconds costs no write, and the
// answer is the same, to the bit, as after a checkpoint.

// unflushed is what a query reads of the journal, for the series of one
// device. A nil *unflushed is an empty journal.
type unflushed struct {
	samples map[string][]Sample              // by metric, in the order committed
	deltas  map[unflushedKey]aggregate.Stats // what each record gains
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

// unflushedOf copies, on the Writer's goroutine, what the journal holds of
// the series of device named in metrics.
func (w *Writer) unflushedOf(device string, metrics []string) *unflushed {
	j := &unflushed{samples: map[string][]Sample{}, deltas: map[unflushedKey]aggregate.Stats{}}
	s := w.store
	for _, m := range metrics {
		s.mu.RLock()
		st := s.series[seriesID(device, m)]
		s.mu.RUnlock()
		if st == nil || len(st.unflushed) == 0 {
			continue
		}
		j.samples[m] = slices.Clone(st.unflushed)
		for _, smp := range st.unflushed {
			for _, l := range allLevels {
				start := l.Truncate(smp.TS)
				if d, ok := w.ckpt.deltas[statKey{l, st, start}]; ok {
					j.deltas[unflushedKey{m, l, start}] = d
				}
			}
		}
	}
	return j
}

// view calls fn with a read transaction of the store and what the journal
// holds of the named series of device, taken together (see above). With
// no Writer running, the journal is empty and j is nil. A Writer that is
// stopping checkpoints its journal last: view waits for that.
func (s *Store) view(device string, metrics []string, fn func(txn *badger.Txn, j *unflushed) error) error {
	w := s.runningWriter()
	if w == nil {
		return s.db.View(func(txn *badger.Txn) error { return fn(txn, nil) })
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
		j := w.unflushedOf(device, metrics)
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
		return s.db.View(func(txn *badger.Txn) error { return fn(txn, nil) })
	}
	defer taken.txn.Discard()
	return fn(taken.txn, taken.j)
}
