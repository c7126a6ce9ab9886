package buffer

import (
	"fmt"
	"math"
	"slices"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
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

// Readings returns the readings that q selects, open and sealed alike, in
// time order (ties by metric, then by the value's bits), at most q.Limit
// of them.
func (s *Store) Readings(q Query) ([]Reading, error) {
	out := make([]Reading, 0, min(q.Limit, 1024))
	err := s.Scan(q, func(r Reading) bool {
		out = append(out, r)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Scan calls fn with each reading that q selects, in the order of
// Readings, until it has called it q.Limit times or fn returns false.
// It reads from one consistent snapshot of the store and the journal
// (unflushed.go), without a checkpoint.
func (s *Store) Scan(q Query, fn func(Reading) bool) error {
	if q.Limit <= 0 || q.Limit > MaxQueryLimit {
		return fmt.Errorf("query limit %d: must be 1..%d", q.Limit, MaxQueryLimit)
	}
	if q.From >= q.To {
		return nil
	}
	metrics := []string{q.Metric}
	if q.Metric == "" {
		metrics = s.metricsOf(q.Device)
	}
	sp := span{device: q.Device, metrics: metrics, from: q.From, to: q.To}
	err := s.view(sp, func(txn *badger.Txn, j *unflushed) error { return s.scan(txn, j, q, metrics, fn) })
	if err != nil {
		return fmt.Errorf("query %s: %w", q.Device, err)
	}
	return nil
}

// scan is Scan of metrics within txn, with the readings j holds.
func (s *Store) scan(txn *badger.Txn, j *unflushed, q Query, metrics []string, fn func(Reading) bool) error {
	cursors := make([]*cursor, 0, len(metrics))
	defer func() {
		for _, c := range cursors {
			c.close()
		}
	}()
	for _, m := range metrics {
		c, err := newCursor(txn, q, m, j.samplesOf(m, q.From, q.To))
		if err != nil {
			return err
		}
		c.texts = s.textsOf(q.Device, m)
		cursors = append(cursors, c)
		if err := c.next(); err != nil {
			return err
		}
	}
	for n := 0; n < q.Limit; n++ {
		best := -1
		for i, c := range cursors {
			if c.ok && (best < 0 || before(c.cur, cursors[best].cur, q.Desc)) {
				best = i
			}
		}
		if best < 0 || !fn(cursors[best].cur) {
			break
		}
		if err := cursors[best].next(); err != nil {
			return err
		}
	}
	return nil
}

// before reports whether a comes before b in a result's order: by time,
// then by metric, then by the value's bits.
func before(a, b Reading, desc bool) bool {
	if a.TS != b.TS {
		return (a.TS < b.TS) != desc
	}
	if a.Metric != b.Metric {
		return a.Metric < b.Metric
	}
	return (math.Float64bits(a.Value) < math.Float64bits(b.Value)) != desc
}

// cursor walks one series within a query's bounds, merging its open points
// with its sealed buckets. Buckets never overlap each other; points may
// fall anywhere, so the two are merged sample by sample.
type cursor struct {
	device, metric string
	q              Query
	pts            pointSource
	bkt            bucketSource
	cur            Reading
	ok             bool
	texts          []string // the series' dictionary; nil for a number series (text.go)
}

// newCursor returns a cursor over a series' readings in the bounds of q:
// those stored, and those of the journal, which are open points once
// checkpointed.
func newCursor(txn *badger.Txn, q Query, metric string, journal []Sample) (*cursor, error) {
	c := &cursor{device: q.Device, metric: metric, q: q}
	if err := c.pts.init(txn, q, metric, journal); err != nil {
		return nil, err
	}
	if err := c.bkt.init(txn, q, metric); err != nil {
		c.pts.close()
		return nil, err
	}
	return c, nil
}

func (c *cursor) close() {
	c.pts.close()
	c.bkt.close()
}

// next moves to the next reading and reports it in c.cur, with c.ok false
// at the end.
func (c *cursor) next() error {
	usePts := c.pts.ok && (!c.bkt.ok || c.pts.head.Less(c.bkt.head) != c.q.Desc)
	var s Sample
	switch {
	case usePts:
		s = c.pts.head
		if err := c.pts.next(); err != nil {
			return err
		}
	case c.bkt.ok:
		s = c.bkt.head
		if err := c.bkt.next(); err != nil {
			return err
		}
	default:
		c.ok = false
		return nil
	}
	c.cur = Reading{Device: c.device, Metric: c.metric, TS: s.TS, Value: s.Value}
	withText(&c.cur, c.texts)
	c.ok = true
	return nil
}

// pointSource walks the open points of a series within bounds. Runs of
// points may overlap in time, so it reads every run that may hold one in
// bounds (a run stays within a day: those that start from the day of
// From on) and sorts their points. A series has few open points: a
// bucket's worth a day, give or take late readings.
type pointSource struct {
	samples []Sample
	i       int
	head    Sample
	ok      bool
}

func (p *pointSource) init(txn *badger.Txn, q Query, metric string, journal []Sample) error {
	p.samples = append(p.samples, journal...)
	prefix := encoding.AppendSeriesPrefix(nil, q.Device, metric)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	if q.From < math.MinInt64+encoding.NanosPerDay {
		it.Rewind()
	} else {
		it.Seek(encoding.AppendTS(prefix[:len(prefix):len(prefix)], int64(encoding.DayOf(q.From))*encoding.NanosPerDay))
	}
	var run []Sample
	for ; it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefix)+encoding.PointKeyFixed {
			return fmt.Errorf("%w: %q", encoding.ErrBadKey, k)
		}
		first := encoding.ParsePointTail(k)
		if first.TS >= q.To {
			break
		}
		err := item.Value(func(v []byte) (err error) {
			run, err = encoding.DecodeRun(run[:0], first, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("run %q: %w", k, err)
		}
		for _, s := range run {
			if s.TS >= q.From && s.TS < q.To {
				p.samples = append(p.samples, s)
			}
		}
	}
	slices.SortFunc(p.samples, compareSamples)
	if q.Desc {
		slices.Reverse(p.samples)
	}
	p.read()
	return nil
}

func (p *pointSource) next() error {
	p.i++
	p.read()
	return nil
}

func (p *pointSource) read() {
	p.ok = p.i < len(p.samples)
	if p.ok {
		p.head = p.samples[p.i]
	}
}

func (p *pointSource) close() {}

// bucketSource walks the samples of the sealed buckets of a series within
// bounds, decoding one bucket at a time.
type bucketSource struct {
	it      *badger.Iterator
	q       Query
	samples []Sample
	i       int // next sample to return, counting from the end when Desc
	head    Sample
	ok      bool
}

func (b *bucketSource) init(txn *badger.Txn, q Query, metric string) error {
	b.q = q
	prefix := encoding.AppendBucketPrefix(nil, q.Device, metric)
	b.it = txn.NewIterator(badger.IteratorOptions{Reverse: q.Desc, Prefix: prefix})
	seek := prefix[:len(prefix):len(prefix)]
	switch {
	case q.Desc:
		// Buckets that start before To, newest first.
		b.it.Seek(encoding.AppendTS(encoding.AppendDay(seek, encoding.DayOf(q.To)), q.To))
	case q.From == math.MinInt64:
		b.it.Rewind()
	default:
		// The bucket holding From starts before it: find it with a short
		// reverse look, then walk forward from there.
		rev := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: prefix})
		rev.Seek(encoding.AppendTS(encoding.AppendDay(seek, encoding.DayOf(q.From)), q.From))
		start := encoding.AppendTS(encoding.AppendDay(seek, encoding.DayOf(q.From)), q.From)
		if rev.Valid() {
			start = rev.Item().KeyCopy(nil)
		}
		rev.Close()
		b.it.Seek(start)
	}
	return b.load()
}

// load decodes the bucket under the iterator, skipping buckets without a
// sample in bounds, and reads its first sample in bounds.
func (b *bucketSource) load() error {
	for ; b.it.Valid(); b.it.Next() {
		item := b.it.Item()
		first, err := encoding.ParseBucketTail(item.Key())
		if err != nil {
			return err
		}
		if !b.q.Desc && first.TS >= b.q.To {
			break
		}
		stop := false
		err = item.Value(func(v []byte) error {
			h, err := encoding.ParseBucketHeader(v)
			if err != nil {
				return err
			}
			if h.Last < b.q.From {
				// Asc: a bucket before the range; Desc: every bucket from
				// here on ends before it.
				stop = b.q.Desc
				b.samples = b.samples[:0]
				return nil
			}
			b.samples, err = encoding.DecodeBucket(b.samples[:0], v)
			return err
		})
		if err != nil {
			return fmt.Errorf("bucket %q: %w", item.Key(), err)
		}
		if stop {
			break
		}
		b.i = 0
		if b.advance() {
			b.it.Next()
			return nil
		}
	}
	b.ok = false
	return nil
}

// advance moves to the next sample of the decoded bucket that is in bounds
// and reports whether there is one.
func (b *bucketSource) advance() bool {
	for b.i < len(b.samples) {
		j := b.i
		if b.q.Desc {
			j = len(b.samples) - 1 - b.i
		}
		b.i++
		s := b.samples[j]
		if s.TS >= b.q.From && s.TS < b.q.To {
			b.head, b.ok = s, true
			return true
		}
	}
	return false
}

func (b *bucketSource) next() error {
	if b.advance() {
		return nil
	}
	return b.load()
}

func (b *bucketSource) close() {
	if b.it != nil {
		b.it.Close()
	}
}

// metricsOf returns the metrics of device in the index, sorted.
func (s *Store) metricsOf(device string) []string {
	var out []string
	s.mu.RLock()
	for _, st := range s.series {
		if st.device == device {
			out = append(out, st.metric)
		}
	}
	s.mu.RUnlock()
	slices.Sort(out)
	return out
}
