package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

func TestAutoMemoryLimit(t *testing.T) {
	def := DefaultConfig().Store
	tests := []struct {
		store  StoreConfig
		series int
		want   int64
	}{
		{def, 0, 14<<20 + 4*4<<10},
		{def, 1000, 14<<20 + 4*4<<10 + 1000*(2048+32*200)},
		// The memtables are outside the Go heap: their size counts for
		// nothing.
		{StoreConfig{MemTableMiB: 64, CacheMiB: 8, BucketSamples: 10000}, 10, 14<<20 + 8*4<<10 + 10*(2048+32*10000)},
		// The block cache holds descriptors of blocks that are in the
		// tables' mapped files: 4 KiB of heap a MiB at most.
		{StoreConfig{CacheMiB: 1024, BucketSamples: 200}, 0, 14<<20 + 4<<20},
		// Series above store.max_series (a limit lowered since they were
		// stored) count for no more.
		{def, def.MaxSeries, 14<<20 + 4*4<<10 + 20000*(2048+32*200)},
		{def, 3 * def.MaxSeries, 14<<20 + 4*4<<10 + 20000*(2048+32*200)},
	}
	for _, tt := range tests {
		if got := autoMemoryLimit(tt.store, tt.series); got != tt.want {
			t.Errorf("memtable %d, cache %d, bucket %d, %d series: got %d, want %d", tt.store.MemTableMiB, tt.store.CacheMiB, tt.store.BucketSamples, tt.series, got, tt.want)
		}
	}
}

// The limiter sets the runtime's limit from the series in a real store,
// follows them as they grow, and stays above the live heap.
func TestMemoryLimiter_FollowsSeries(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	store, w := testkit.StartWriter(t, buffer.Options{}, buffer.WriterOptions{})

	cfg := DefaultConfig().Store
	var live, other uint64 = 6 << 20, 4 << 20
	m := &memoryLimiter{cfg: cfg, store: store, live: func() (uint64, uint64) { return live, other }}
	if got, want := m.set(), autoMemoryLimit(cfg, 0); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("empty store: set %d, runtime has %d, want %d", got, debug.SetMemoryLimit(-1), want)
	}
	// 200 series: 1.6 MiB more.
	var rs []buffer.Reading
	for i := range 200 {
		rs = append(rs, buffer.Reading{Device: fmt.Sprintf("d%03d", i), Metric: "t", TS: time.Now().UnixMilli(), Value: 1})
	}
	res := make(chan buffer.Result, 1)
	if err := w.Submit(t.Context(), rs, func(r buffer.Result) { res <- r }); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.Err != nil || r.Stored != len(rs) {
		t.Fatalf("write: %+v", r)
	}
	if got, want := m.set(), autoMemoryLimit(cfg, 200); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("200 series: set %d, runtime has %d, want %d", got, debug.SetMemoryLimit(-1), want)
	}
	// A compaction holds 100 MiB: the limit goes a quarter above it (and
	// above what the runtime holds beside the heap), and comes back down
	// once it is over.
	live = 100 << 20
	if got, want := m.set(), int64(125<<20+4<<20); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("100 MiB live: set %d, runtime has %d, want %d", got, debug.SetMemoryLimit(-1), want)
	}
	// 14 MiB live: a quarter is less than 4 MiB.
	live = 14 << 20
	if got, want := m.set(), int64(14<<20+4<<20+4<<20); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("14 MiB live: set %d, runtime has %d, want %d", got, debug.SetMemoryLimit(-1), want)
	}
	live = 6 << 20
	if got, want := m.set(), autoMemoryLimit(cfg, 200); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("6 MiB live again: set %d, runtime has %d, want %d", got, debug.SetMemoryLimit(-1), want)
	}
}

// The limit never goes above the machine's ceiling, not even for a live
// heap above it.
func TestMemoryLimiter_Ceiling(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	store, err := buffer.Open(buffer.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var live uint64 = 10 << 20
	m := &memoryLimiter{cfg: DefaultConfig().Store, store: store, ceiling: 12 << 20, live: func() (uint64, uint64) { return live, 0 }}
	if got := m.set(); got != 12<<20 || debug.SetMemoryLimit(-1) != 12<<20 {
		t.Errorf("auto limit %d above a ceiling of 12 MiB: set %d, runtime has %d, want the ceiling", autoMemoryLimit(m.cfg, 0), got, debug.SetMemoryLimit(-1))
	}
	live = 100 << 20
	if got := m.set(); got != 12<<20 {
		t.Errorf("100 MiB live: set %d, want the ceiling, 12 MiB", got)
	}
}

// memoryCeiling takes three quarters of the least of the physical memory
// and the limits of the process's cgroups, cgroup v2's and v1's, and of
// their ancestors.
func TestMemoryCeiling(t *testing.T) {
	const meminfo = "MemTotal:         512000 kB\nMemFree:          100000 kB\n"
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"nothing readable", nil, math.MaxInt64},
		{"physical memory only", map[string]string{"proc/meminfo": meminfo}, 512000 << 10 / 4 * 3},
		{"cgroup v2, no limit", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/system.slice/cairn.service\n",
			"sys/fs/cgroup/system.slice/cairn.service/memory.max": "max\n",
		}, 512000 << 10 / 4 * 3},
		{"cgroup v2, a limit on the service", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/system.slice/cairn.service\n",
			"sys/fs/cgroup/system.slice/cairn.service/memory.max": "134217728\n",
			"sys/fs/cgroup/system.slice/memory.max":               "max\n",
		}, 128 << 20 / 4 * 3},
		{"cgroup v2, a lower limit on a parent", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/system.slice/cairn.service\n",
			"sys/fs/cgroup/system.slice/cairn.service/memory.max": "134217728\n",
			"sys/fs/cgroup/system.slice/memory.max":               "67108864\n",
		}, 64 << 20 / 4 * 3},
		{"cgroup v1", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "5:devices:/\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/docker/memory.limit_in_bytes":     "268435456\n",
		}, 256 << 20 / 4 * 3},
		{"a cgroup limit above the physical memory", map[string]string{
			"proc/meminfo":             meminfo,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, 512000 << 10 / 4 * 3},
	}
	for _, tt := range tests {
		root := t.TempDir()
		for name, content := range tt.files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := memoryCeiling(root); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

// The runtime's own figures: something live, and the runtime's overhead
// beside the heap, a few MiB at most here.
func TestLiveHeap(t *testing.T) {
	keep := make([]byte, 16<<20)
	runtime.GC()
	live, other := liveHeap()
	runtime.KeepAlive(keep)
	if live < 16<<20 {
		t.Errorf("live heap %d, want at least the 16 MiB kept", live)
	}
	if other == 0 || other > 64<<20 {
		t.Errorf("memory beside the heap %d, want some, and less than 64 MiB", other)
	}
}

// A gateway started with the defaults sets the auto limit, says so, and
// stops its limiter with everything else.
func TestRun_AutoMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	t.Setenv("GOMEMLIMIT", "") // TestMain's "off" would win over auto

	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	line, err := d.log.WaitLine(`msg="cairn started"`, d.done, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, `memory_limit_mib="auto (`) {
		t.Errorf("started line without the auto limit: %s", line)
	}
	if got := debug.SetMemoryLimit(-1); got < autoMemoryLimit(DefaultConfig().Store, 0) || got == prev {
		t.Errorf("runtime memory limit %d, want the auto limit (at least %d)", got, autoMemoryLimit(DefaultConfig().Store, 0))
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
}
