package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// The Go runtime lets the heap grow to twice what is live before it
// collects. Most of what is live in a gateway is the store's own buffers:
// its memtables, the table a flush builds and its caches. Doubling those
// bought nothing but RSS, so by default (memory_limit_mib: auto) the
// runtime gets a soft limit sized to them, plus what the gateway keeps per
// series, plus room for the rest: see autoMemoryLimit.

// Parts of the auto memory limit.
const (
	autoLimitBase      = 12 << 20 // the runtime, MQTT, HTTP, decoding and batches in flight
	autoLimitSeries    = 2 << 10  // a series' state, its name and its pending aggregates
	autoLimitPerSample = 32       // a sample held open, with its share of the run index
)

// autoMemoryLimit is memory_limit_mib auto for s with series series in the
// store: 3 memtables (the one written, one being flushed and the table
// built from it), both caches, and each series with a full open bucket.
func autoMemoryLimit(s StoreConfig, series int) int64 {
	perSeries := int64(autoLimitSeries + autoLimitPerSample*s.BucketSamples)
	return autoLimitBase + 3*int64(s.MemTableMiB)<<20 + 2*int64(s.CacheMiB)<<20 + int64(series)*perSeries
}

// memoryLimiter keeps the auto memory limit in step with the number of
// series, which grows as new sensors and metrics appear, and above what is
// live: a limit below the live heap would have the runtime collect
// garbage without pause (up to half the CPU) for nothing. Badger's
// compactions hold more for a while as a large store's tree deepens; the
// limit then leaves the heap a quarter of what is live (8 MiB at least)
// above it, as GOGC 25 would.
type memoryLimiter struct {
	cfg   StoreConfig
	store *buffer.Store
	limit int64 // the limit set last
	// live returns the heap live after the last GC, and the memory the
	// runtime counts against the limit beside the heap (stacks, its own
	// metadata); nil for the runtime's figures.
	live func() (live, other uint64)
}

// memoryLimitCheck is how often the limiter looks again.
const memoryLimitCheck = time.Second

// The limit leaves the heap at least this much room above what is live:
// a quarter of it (liveHeadroom 4), and minHeadroom at least.
const (
	liveHeadroom = 4
	minHeadroom  = 8 << 20
)

// set sets the limit for the series stored and the heap live now, if it
// moved by 1 MiB or more, and returns it.
func (m *memoryLimiter) set() int64 {
	if m.live == nil {
		m.live = liveHeap
	}
	live, other := m.live()
	headroom := max(live/liveHeadroom, minHeadroom)
	limit := max(autoMemoryLimit(m.cfg, m.store.SeriesCount()), int64(live+headroom+other))
	if d := limit - m.limit; d >= 1<<20 || d <= -1<<20 {
		debug.SetMemoryLimit(limit)
		m.limit = limit
	}
	return m.limit
}

func (m *memoryLimiter) run(ctx context.Context) error {
	tick := time.NewTicker(memoryLimitCheck)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			m.set()
		case <-ctx.Done():
			return nil
		}
	}
}

// liveHeap returns the heap that was live after the last GC, and what the
// runtime counts against its memory limit beside the heap.
func liveHeap() (live, other uint64) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(samples)
	var v [6]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	heap := v[2] + v[3] + v[4] + v[5]
	if v[1] > heap {
		other = v[1] - heap
	}
	return v[0], other
}

// tablePagesInterval is how often the pages of Badger's mapped tables
// leave the resident set (buffer.Store.ReleaseTablePages): what one
// interval's compactions and queries touch is what stays counted.
// Released every second instead, the RSS over the second half of a
// 10 M-reading backlog had a 99th percentile of 69 MiB, not 64 to 65
// (sampled every 100 ms; one run against three).
const tablePagesInterval = 250 * time.Millisecond

// releaseTablePages releases the store's table pages every
// tablePagesInterval until ctx is done. If that fails (no /proc), it says
// so once and stops trying: memory then grows with the store, as page
// cache.
func releaseTablePages(ctx context.Context, store *buffer.Store, log *slog.Logger) {
	tick := time.NewTicker(tablePagesInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if _, err := store.ReleaseTablePages(); err != nil {
				log.Warn("cannot keep the store's table files out of resident memory; they stay as page cache", "err", err)
				tick.Stop()
			}
		case <-ctx.Done():
			return
		}
	}
}
