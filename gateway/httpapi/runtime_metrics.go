package httpapi

import (
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RuntimeCollector reports the Go runtime's and the process's figures,
// under the names Prometheus's Go and process collectors give them: the
// goroutines and threads, the heap, the collections, and the process's
// CPU time, memory, open files and start time (those read from /proc,
// where there is one).
func RuntimeCollector() Collector {
	d := NewDesc
	var (
		goroutines  = d("go_goroutines", "Number of goroutines that currently exist.")
		threads     = d("go_threads", "Number of OS threads created.")
		maxProcs    = d("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously.")
		info        = d("go_info", "Information about the Go environment.", "version")
		gcLimit     = d("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.")
		heapAlloc   = d("go_memstats_alloc_bytes", "Number of heap bytes allocated and currently in use.")
		allocTotal  = d("go_memstats_alloc_bytes_total", "Total number of heap bytes allocated, even if freed.")
		heapObjects = d("go_memstats_heap_objects", "Number of currently allocated objects.")
		sys         = d("go_memstats_sys_bytes", "Number of bytes obtained from system.")
		nextGC      = d("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.")
		stack       = d("go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.")
		released    = d("go_memstats_heap_released_bytes", "Number of heap bytes released to OS.")
		cpu         = d("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")
		rss         = d("process_resident_memory_bytes", "Resident memory size in bytes.")
		vsize       = d("process_virtual_memory_bytes", "Virtual memory size in bytes.")
		openFDs     = d("process_open_fds", "Number of open file descriptors.")
		maxFDs      = d("process_max_fds", "Maximum number of open file descriptors.")
		start       = d("process_start_time_seconds", "Start time of the process since unix epoch in seconds.")
	)
	names := []string{
		"/sched/goroutines:goroutines",
		"/gc/gomemlimit:bytes",
		"/gc/heap/allocs:bytes",
		"/gc/heap/objects:objects",
		"/memory/classes/total:bytes",
		"/gc/heap/goal:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/objects:bytes",
	}
	return CollectorFunc(func(s *Sink) {
		samples := make([]metrics.Sample, len(names))
		for i, n := range names {
			samples[i].Name = n
		}
		metrics.Read(samples)
		v := func(i int) float64 {
			if samples[i].Value.Kind() == metrics.KindUint64 {
				return float64(samples[i].Value.Uint64())
			}
			return 0
		}
		s.Gauge(goroutines, v(0))
		n, _ := runtime.ThreadCreateProfile(nil)
		s.Gauge(threads, float64(n))
		s.Gauge(maxProcs, float64(runtime.GOMAXPROCS(0)))
		s.Gauge(info, 1, runtime.Version())
		s.Gauge(gcLimit, v(1))
		s.Counter(allocTotal, v(2))
		s.Gauge(heapObjects, v(3))
		s.Gauge(sys, v(4))
		s.Gauge(nextGC, v(5))
		s.Gauge(stack, v(6))
		s.Gauge(released, v(7))
		s.Gauge(heapAlloc, v(8))

		if p, ok := readProcStat(); ok {
			s.Counter(cpu, p.cpuSeconds)
			s.Gauge(rss, p.rssBytes)
			s.Gauge(vsize, p.vsizeBytes)
			s.Gauge(start, p.startSeconds)
		}
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			s.Gauge(openFDs, float64(len(fds)))
		}
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
			s.Gauge(maxFDs, float64(lim.Cur))
		}
	})
}

// procStat is what /proc/self/stat says of the process.
type procStat struct {
	cpuSeconds, rssBytes, vsizeBytes, startSeconds float64
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go builds for.
const clockTicks = 100

// readProcStat reads /proc/self/stat (and /proc/stat's boot time for the
// start time); false where there is none.
func readProcStat() (procStat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from after its closing one. Field 3 (state) is then f[0].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(k int) float64 {
		n, _ := strconv.ParseFloat(f[k], 64)
		return n
	}
	// utime 14, stime 15, starttime 22, vsize 23, rss 24 (in pages).
	p := procStat{
		cpuSeconds: (num(11) + num(12)) / clockTicks,
		vsizeBytes: num(20),
		rssBytes:   num(21) * float64(os.Getpagesize()),
	}
	if boot, ok := bootTime(); ok {
		p.startSeconds = boot + num(19)/clockTicks
	} else {
		p.startSeconds = float64(time.Now().Unix())
	}
	return p, true
}

// bootTime is /proc/stat's btime, in seconds since the epoch.
func bootTime() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return n, err == nil
		}
	}
	return 0, false
}
