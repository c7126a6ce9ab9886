//go:build !cairn_noprofile

package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// Release builds leave the profiles out (the tag cairn_noprofile in
// scripts/release-tags: runtime/pprof costs 0.2 MB): profile_off.go.

// cpuProfileEnv names a file that `cairn run` writes a CPU profile of its
// whole run to, when it stops (for benchmarks: scripts/bench.sh passes it
// on). Unset: no profile.
const cpuProfileEnv = "CAIRN_CPU_PROFILE"

// startCPUProfile starts the CPU profile cpuProfileEnv asks for, and
// returns what stops it and writes it out.
func startCPUProfile() (stop func(), err error) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// heapProfileEnv names a file that `cairn run` writes a heap profile to
// (the live heap at the last GC, and what was allocated since the start)
// on SIGUSR1 and when it stops, each time anew. Unset: no profile, and
// SIGUSR1 keeps its default action.
const heapProfileEnv = "CAIRN_HEAP_PROFILE"

// startHeapProfile has the heap profile that heapProfileEnv asks for
// written on SIGUSR1, and returns what stops that and writes it once more.
// A profile that cannot be written is logged; the daemon runs on.
func startHeapProfile(log *slog.Logger) (stop func(), err error) {
	path := os.Getenv(heapProfileEnv)
	if path == "" {
		return func() {}, nil
	}
	write := func() {
		if err := writeHeapProfile(path); err != nil {
			log.Warn("heap profile", "err", err)
		}
	}
	// Fail at the start on a file that cannot be made, as the CPU
	// profile does.
	if err := writeHeapProfile(path); err != nil {
		return nil, err
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-usr1:
				write()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(done)
		write()
	}, nil
}

// writeHeapProfile writes the heap profile to path after a GC (so that
// its live heap is up to date), through a file beside it renamed over
// it: a reader never sees half a profile.
func writeHeapProfile(path string) error {
	runtime.GC()
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	return nil
}
