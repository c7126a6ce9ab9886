package buffer

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Query selects readings of one device: of one metric or of all of them, in
// the half-open time range [From, To), oldest or newest first.
type Query struct {
	Device string
	Metric string // "" selects every metric of the device
	From   int64  // inclusive, ns since the epoch; math.MinInt64 for no bound
	To     int64  // exclusive, ns since the epoch; math.MaxInt64 for no bound
	Desc   bool   // newest first
	Limit  int    // at most this many readings; must be > 0
}

// MaxQueryLimit is the largest Query.Limit accepted.
const MaxQueryLimit = 100000

// Readings returns the readings that q selects, in time order (ties by
// metric, then value), at most q.Limit of them.
func (s *Store) Readings(q Query) ([]Reading, error) {
	if q.Limit <= 0 || q.Limit > MaxQueryLimit {
		return nil, fmt.Errorf("query limit %d: must be 1..%d", q.Limit, MaxQueryLimit)
	}
	if q.From >= q.To {
		return nil, nil
	}
	metrics := []string{q.Metric}
	if q.Metric == "" {
		metrics = s.metricsOf(q.Device)
	}
	var out []Reading
	err := s.db.View(func(txn *badger.Txn) error {
		cursors := make([]*cursor, 0, len(metrics))
		defer func() {
			for _, c := range cursors {
				c.it.Close()
			}
		}()
		for _, m := range metrics {
			c := newCursor(txn, q, m)
			cursors = append(cursors, c)
			if err := c.next(); err != nil {
				return err
			}
		}
		for len(out) < q.Limit {
			best := -1
			for i, c := range cursors {
				if !c.ok {
					continue
				}
				if best < 0 || before(c.cur, cursors[best].cur, q.Desc) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			out = append(out, cursors[best].cur)
			if err := cursors[best].next(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q.Device, err)
	}
	return out, nil
}

// before reports whether a comes before b in a result's order.
func before(a, b Reading, desc bool) bool {
	if a.TS != b.TS {
		return (a.TS < b.TS) != desc
	}
	if a.Metric != b.Metric {
		return a.Metric < b.Metric
	}
	return a.Value < b.Value
}

// cursor walks one series within a query's bounds.
type cursor struct {
	it     *badger.Iterator
	prefix []byte
	q      Query
	cur    Reading
	ok     bool
	first  bool
}

func newCursor(txn *badger.Txn, q Query, metric string) *cursor {
	prefix := appendSeriesPrefix(nil, q.Device, metric)
	it := txn.NewIterator(badger.IteratorOptions{Reverse: q.Desc, Prefix: prefix})
	return &cursor{it: it, prefix: prefix, q: q, first: true}
}

// next moves to the next reading of the series within bounds and reports it
// in c.cur, with c.ok false at the end.
func (c *cursor) next() error {
	if c.first {
		c.first = false
		seek := c.prefix[:len(c.prefix):len(c.prefix)]
		if c.q.Desc {
			// A bare timestamp sorts after every key before To and
			// before every key at To.
			seek = appendTS(seek, c.q.To)
		} else {
			seek = appendTS(seek, c.q.From)
		}
		c.it.Seek(seek)
	} else {
		c.it.Next()
	}
	c.ok = false
	if !c.it.ValidForPrefix(c.prefix) {
		return nil
	}
	k := c.it.Item().Key()
	if len(k) != len(c.prefix)+pointKeyFixed {
		return fmt.Errorf("%w: %q", errBadKey, k)
	}
	r, err := parsePointKey(k)
	if err != nil {
		return err
	}
	if r.TS < c.q.From || r.TS >= c.q.To {
		return nil
	}
	c.cur, c.ok = r, true
	return nil
}

// metricsOf returns the metrics of device in the index, sorted.
func (s *Store) metricsOf(device string) []string {
	var out []string
	for _, se := range s.SeriesList() {
		if se.Device == device {
			out = append(out, se.Metric)
		}
	}
	return out
}
