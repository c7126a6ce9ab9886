//go:build testclock

package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// testClockEnv names a file that moves the clock of a testclock build:
//
//	offset 8760h
//	synced no
//
// The wall clock is the system's plus offset; synced (yes, no or unknown)
// is what the kernel is taken to say. The file is read again at most
// every testClockReread. Release builds have no such thing.
const testClockEnv = "CAIRN_TEST_CLOCK"

const testClockReread = 50 * time.Millisecond

type testClock struct {
	path string

	mu     sync.Mutex
	read   time.Time // when the file was read last
	offset time.Duration
	synced buffer.SyncState
}

func clockSource() buffer.ClockOptions {
	path := os.Getenv(testClockEnv)
	if path == "" {
		return buffer.ClockOptions{}
	}
	c := &testClock{path: path}
	return buffer.ClockOptions{
		Now:    func() time.Time { off, _ := c.get(); return time.Now().Add(off) },
		Synced: func() buffer.SyncState { _, s := c.get(); return s },
	}
}

func (c *testClock) get() (time.Duration, buffer.SyncState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.read) < testClockReread {
		return c.offset, c.synced
	}
	c.read = time.Now()
	b, err := os.ReadFile(c.path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test clock:", err)
		return c.offset, c.synced
	}
	offset, synced := time.Duration(0), buffer.SyncUnknown
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "offset":
			if offset, err = time.ParseDuration(v); err != nil {
				fmt.Fprintln(os.Stderr, "test clock: offset:", err)
				return c.offset, c.synced
			}
		case "synced":
			synced = map[string]buffer.SyncState{"yes": buffer.SyncYes, "no": buffer.SyncNo}[v]
		}
	}
	c.offset, c.synced = offset, synced
	return offset, synced
}
