package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

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
