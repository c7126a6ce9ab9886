package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
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

// Badger reads its tables through their memory maps, and what a read
// touches stays counted in the resident set until it is released
// (buffer.Store.ReleaseTablePages). Compactions write tables without
// mapping them and give back what they read (see third_party/badger/CAIRN.md);
// opening a new table, queries, the outbox and sealing do not. Released every 250 ms, the
// pages touched within one interval made the peaks while a backlog
// built. So the file-backed resident set is read (from /proc/self/statm:
// microseconds) every tablePagesCheck while it grows, and the pages are
// released as soon as it has grown tablePagesSlack. While it does not
// grow, the checks slow down to one every tablePagesIdle: checked every
// 25 ms, an idle gateway used 1.8% of a core instead of 1.0%. What is
// left after a burst of reads smaller than that goes within
// tablePagesSweep.
const (
	tablePagesCheck = 25 * time.Millisecond
	tablePagesIdle  = 400 * time.Millisecond
	tablePagesGrow  = 64 << 10 // growth since the last check that keeps checks at tablePagesCheck
	tablePagesSlack = 2 << 20
	tablePagesSweep = time.Second
)

// pagesTrigger says when the table pages are due for release, from the
// file-backed resident set: when it has grown tablePagesSlack above its
// lowest since the last release, or when it differs at all from what the
// last release left, tablePagesSweep after it. What a release cannot drop
// (the memtables' logs, the program's text, tables a compaction is still
// writing) raises that floor rather than triggering release after
// release. It also says when to look next.
type pagesTrigger struct {
	left  int64         // the resident file bytes the last release left
	floor int64         // the fewest seen since
	at    time.Time     // when the last release was
	last  int64         // the resident file bytes at the last check
	wait  time.Duration // until the next check

	read func() (int64, error) // the resident file bytes: residentFileBytes
}

// due reports whether resident file bytes at now call for a release, and
// sets the wait until the next check: tablePagesCheck if they grew by
// tablePagesGrow since the last, twice the last wait (up to
// tablePagesIdle) if not.
func (p *pagesTrigger) due(resident int64, now time.Time) bool {
	if resident-p.last >= tablePagesGrow {
		p.wait = tablePagesCheck
	} else {
		p.wait = min(2*p.wait, tablePagesIdle)
	}
	p.last = resident
	p.floor = min(p.floor, resident)
	return resident-p.floor >= tablePagesSlack ||
		resident != p.left && now.Sub(p.at) >= tablePagesSweep
}

// released records a release that left resident file bytes at now.
func (p *pagesTrigger) released(resident int64, now time.Time) {
	p.left, p.floor, p.last, p.at = resident, resident, resident, now
	p.wait = max(p.wait, tablePagesCheck)
}

// poll releases store's table pages if the resident file bytes call for it.
func (p *pagesTrigger) poll(store *buffer.Store) error {
	resident, err := p.read()
	if err != nil || !p.due(resident, time.Now()) {
		return err
	}
	if _, err := store.ReleaseTablePages(); err != nil {
		return err
	}
	resident, err = p.read()
	p.released(resident, time.Now())
	return err
}

// residentFileBytes returns the file-backed part of the process's resident
// set: /proc/self/statm's shared pages (file pages and shared memory, of
// which cairn has none).
func residentFileBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, fmt.Errorf("/proc/self/statm: %q has fewer than 3 fields", b)
	}
	pages, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/statm: %w", err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// releaseTablePages releases the store's table pages when pagesTrigger
// says so, reading the resident file bytes with read, until ctx is done.
// If reading them or releasing fails (no /proc), it says so once and
// stops trying, but not the gateway: memory then grows with the store, as
// page cache.
func releaseTablePages(ctx context.Context, store *buffer.Store, read func() (int64, error), log *slog.Logger) {
	trigger := pagesTrigger{read: read}
	err := func() error {
		resident, err := read()
		if err != nil {
			return err
		}
		trigger.released(resident, time.Now())
		timer := time.NewTimer(trigger.wait)
		defer timer.Stop()
		for {
			select {
			case <-timer.C:
				if err := trigger.poll(store); err != nil {
					return err
				}
				timer.Reset(trigger.wait)
			case <-ctx.Done():
				return nil
			}
		}
	}()
	if err != nil {
		log.Warn("cannot keep the store's table files out of resident memory; they stay as page cache", "err", err)
		<-ctx.Done()
	}
}
