//go:build !testclock

package main

import "github.com/cairn-gateway/cairn/buffer"

// clockSource is the wall clock and the kernel's word on it: the
// system's. Builds with the testclock tag, for tests only, read them from
// a file instead (testclock.go).
func clockSource() buffer.ClockOptions { return buffer.ClockOptions{} }
