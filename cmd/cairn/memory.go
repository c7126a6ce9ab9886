package main

import (
	"context"
	"log/slog"
	"runtime/debug"
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
	autoLimitBase      = 16 << 20 // the runtime, MQTT, HTTP, decoding and batches in flight
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
// series, which grows as new sensors and metrics appear.
type memoryLimiter struct {
	cfg   StoreConfig
	store *buffer.Store
	log   *slog.Logger
	limit int64 // the limit set last
}

// memoryLimitCheck is how often the limiter counts the series again.
const memoryLimitCheck = 30 * time.Second

// set sets the limit for the series stored now, if it moved by 1 MiB or
// more, and returns it.
func (m *memoryLimiter) set() int64 {
	limit := autoMemoryLimit(m.cfg, m.store.SeriesCount())
	if d := limit - m.limit; d >= 1<<20 || d <= -1<<20 {
		debug.SetMemoryLimit(limit)
		if m.limit != 0 {
			m.log.Debug("memory limit", "mib", limit>>20)
		}
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
