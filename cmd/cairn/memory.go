package main

import (
	"context"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// The Go runtime lets the heap grow to twice what is live before it
// collects. Much of what is live in a gateway is what the store keeps for
// each series. Doubling that buys nothing but RSS, so by default
// (memory_limit_mib: auto) the runtime gets a soft limit sized to it,
// plus room for the rest: see autoMemoryLimit. The memtables are not in
// the Go heap (their arenas are mapped on their own, patch 0017 of
// cairn's copy of Badger), nor is the table a flush builds (it is written
// block by block, patch 0016), nor the blocks of Badger's block cache
// (cairn's tables are not compressed: a cached block points into its
// table's mapped file), so the limit does not count them.

// Parts of the auto memory limit.
const (
	// autoLimitBase is the runtime, MQTT, HTTP, decoding, the batches in
	// flight and the block cache's fixed part. 12 MiB and 8 MiB for the
	// caches (2 x store.cache_mib, which they do not hold) let the heap
	// of a 200k-message drain grow to 12-13 MB over 7-9 live. With 14
	// MiB, and minHeadroom 4 MiB (which sets a drain's limit after its
	// first second), a drain peaked at 27.9 against 31.6 MiB, at 182k
	// against 239k readings/s (docs/performance.md).
	autoLimitBase = 14 << 20
	// autoLimitCache is the heap a MiB of block cache holds: about 16
	// blocks of 64 KiB (a block costs its bytes, patch 0020 of cairn's
	// copy of Badger; a table's last block is smaller), each a descriptor
	// of about 250 bytes with its key and the cache's entry; the blocks'
	// bytes stay in the mapped tables.
	autoLimitCache     = 4 << 10
	autoLimitSeries    = 2 << 10 // a series' state, its name and its pending aggregates
	autoLimitPerSample = 32      // a sample held open, with its share of the run index
)

// autoMemoryLimit is memory_limit_mib auto for s with series series in the
// store: the base, the block cache, and each series with a full open
// bucket. The series count at most store.max_series: a store opened with
// more (the limit lowered since) does not raise it further, and with the
// defaults the figure stays at most 14 MiB + 16 KiB + 20,000 x 8.25 KiB =
// about 175 MiB.
func autoMemoryLimit(s StoreConfig, series int) int64 {
	if s.MaxSeries > 0 {
		series = min(series, s.MaxSeries)
	}
	perSeries := int64(autoLimitSeries + autoLimitPerSample*s.BucketSamples)
	return autoLimitBase + int64(s.CacheMiB)*autoLimitCache + int64(series)*perSeries
}

// memoryLimiter keeps the auto memory limit in step with the number of
// series, which grows as new sensors and metrics appear, and above what is
// live: a limit below the live heap would have the runtime collect
// garbage without pause (up to half the CPU) for nothing. Badger's
// compactions hold more for a while as a large store's tree deepens; the
// limit then leaves the heap a quarter of what is live (4 MiB at least)
// above it, as GOGC 25 would.
//
// The limit never exceeds what the machine can give (memoryCeiling): above
// that, the runtime would not collect before the kernel's OOM killer came,
// and a limit the heap cannot keep under makes the runtime collect
// without pause, which is still better than a crash loop.
type memoryLimiter struct {
	cfg   StoreConfig
	store *buffer.Store
	limit int64 // the limit set last
	// ceiling is the most the limit may be (memoryCeiling); 0 until set
	// looks it up.
	ceiling int64
	// live returns the heap live after the last GC, and the memory the
	// runtime counts against the limit beside the heap (stacks, its own
	// metadata); nil for the runtime's figures.
	live func() (live, other uint64)
}

// memoryLimitCheck is how often the limiter looks again.
const memoryLimitCheck = time.Second

// The limit leaves the heap at least this much room above what is live:
// a quarter of it (liveHeadroom 4), and minHeadroom at least. A drain
// holds 7-9 MiB live (the messages in flight and their commits), and the
// runtime counts 5-6 MiB beside the heap (its metadata, the profiler's
// buckets, stacks): 8 MiB of room put the limit at 21-23 MiB for as long
// as a drain lasted, whatever the auto limit.
const (
	liveHeadroom = 4
	minHeadroom  = 4 << 20
)

// set sets the limit for the series stored and the heap live now, if it
// moved by 1 MiB or more, and returns it.
func (m *memoryLimiter) set() int64 {
	if m.live == nil {
		m.live = liveHeap
	}
	if m.ceiling == 0 {
		m.ceiling = memoryCeiling("/")
	}
	live, other := m.live()
	headroom := max(live/liveHeadroom, minHeadroom)
	limit := max(autoMemoryLimit(m.cfg, m.store.SeriesCount()), int64(live+headroom+other))
	limit = min(limit, m.ceiling)
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

// ceilingShare is the share of what the machine has, its physical memory
// or the memory limit of the process's cgroup, that the auto limit may
// take: the kernel, the page cache of the store's tables (counted in a
// cgroup's limit too), memory outside the Go heap and, on a board, the
// other programs need the rest. Three quarters leaves 128 MB of a 512 MB
// board for them.
//
// Badger reads its tables through memory maps, and a page that a read
// touched stays mapped, counted in cairn's RSS, until its table is
// deleted. cairn leaves such pages to the kernel: they are page cache of
// the store's files, which a cgroup (systemd's MemoryMax=) is charged for
// whether they are mapped or not, and which the kernel reclaims from the
// cgroup or the machine when either needs the memory, mapped or not.
// Unmapping them (madvise MADV_DONTNEED) lowered RSS and nothing else:
// while a 3 M-reading backlog built (scripts/bench.sh uplink_backlog,
// three interleaved runs each on a shared 2-core VM), the cgroup was
// charged 78-80 MiB at the end with the pages unmapped every 25 ms and
// 80-83 without, 50-52 MiB of it the store's page cache either way
// (peaks 87-93 and 94 MiB; runs vary by 7); the peak RSS was 47-52 and
// 56-64 MiB. Held to 64 MiB, both ran at the limit at the same rate
// with the same few major faults, and without OOM. See docs/storage.md.
const (
	ceilingShareNum = 3
	ceilingShareDen = 4
)

// memoryCeiling returns the most the auto memory limit may be: three
// quarters of the least of the physical memory (/proc/meminfo MemTotal)
// and the memory limits of the process's cgroup and of its ancestors
// (cgroup v2 memory.max, or v1 memory.limit_in_bytes), read under root
// ("/" but in tests). What cannot be read does not count; with nothing
// known there is no ceiling (math.MaxInt64).
func memoryCeiling(root string) int64 {
	least := int64(math.MaxInt64)
	if b, err := os.ReadFile(filepath.Join(root, "proc/meminfo")); err == nil {
		if n, ok := memTotal(b); ok {
			least = n
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		least = min(least, cgroupMemoryLimit(b, filepath.Join(root, "sys/fs/cgroup")))
	}
	if least == math.MaxInt64 {
		return least
	}
	return least / ceilingShareDen * ceilingShareNum
}

// memTotal returns MemTotal of /proc/meminfo's text, in bytes.
func memTotal(meminfo []byte) (int64, bool) {
	for _, line := range strings.Split(string(meminfo), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err == nil && kb > 0
		}
	}
	return 0, false
}

// cgroupMemoryLimit returns the least memory limit of the cgroups that
// /proc/self/cgroup's text names, and of their ancestors, with the cgroup
// file systems mounted at mnt: cgroup v2's (mnt itself) and v1's memory
// controller (mnt/memory). math.MaxInt64 when none has a limit.
func cgroupMemoryLimit(procCgroup []byte, mnt string) int64 {
	least := int64(math.MaxInt64)
	for _, line := range strings.Split(string(procCgroup), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var dir, file string
		switch {
		case f[0] == "0" && f[1] == "":
			dir, file = mnt, "memory.max"
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			dir, file = filepath.Join(mnt, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		// From the process's cgroup up to the root of the hierarchy.
		for p := path.Clean("/" + f[2]); ; p = path.Dir(p) {
			b, err := os.ReadFile(filepath.Join(dir, p, file))
			if err == nil {
				s := strings.TrimSpace(string(b))
				// "max" is no limit in v2; v1 says so with a number near
				// MaxInt64, which least keeps anyway.
				if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
					least = min(least, n)
				}
			}
			if p == "/" {
				break
			}
		}
	}
	return least
}
