//go:build cairn_noprofile

package main

import (
	"fmt"
	"log/slog"
	"os"
)

// A build with the tag cairn_noprofile (a release build: scripts/release-tags)
// has no profiles: runtime/pprof is left out. Asking for one fails the
// start, saying why.

const (
	cpuProfileEnv  = "CAIRN_CPU_PROFILE"
	heapProfileEnv = "CAIRN_HEAP_PROFILE"
)

func startCPUProfile() (stop func(), err error) { return noProfile(cpuProfileEnv) }

func startHeapProfile(*slog.Logger) (stop func(), err error) { return noProfile(heapProfileEnv) }

// noProfile fails when env asks for a profile.
func noProfile(env string) (func(), error) {
	if os.Getenv(env) != "" {
		return nil, fmt.Errorf("%s: this build of cairn has no profiles (built with the tag cairn_noprofile, as releases are): build it with go build ./cmd/cairn", env)
	}
	return func() {}, nil
}
