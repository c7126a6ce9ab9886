package main

import (
	"errors"
	"runtime"
	"strconv"
)

// exitUnsupported is EX_UNAVAILABLE: `cairn run` cannot work on this
// system. The unit lists it in RestartPreventExitStatus.
const exitUnsupported = 69

// errWordSize is why `cairn run` refuses to start on a 32-bit system.
// Badger's allocator (ristretto z/allocator.go) overflows on 32-bit ints
// and hands out overlapping buffers, so tables flushed to disk come out
// corrupt; its value-log files are also mapped at twice their size, which
// exhausts a 32-bit address space. See docs/raspberry-pi.md.
var errWordSize = errors.New("cairn run needs a 64-bit system: this is a 32-bit build (" +
	runtime.GOOS + "/" + runtime.GOARCH + "), and its storage engine corrupts data on 32-bit systems. " +
	"Install a 64-bit OS (on a Raspberry Pi 3, 4, 5 or Zero 2 W: Raspberry Pi OS (64-bit) or Debian arm64) " +
	"and the arm64 build of cairn")

// checkWordSize returns errWordSize on a 32-bit build.
func checkWordSize() error {
	if strconv.IntSize < 64 {
		return errWordSize
	}
	return nil
}
