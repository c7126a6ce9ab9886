package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRun_HeapProfile: with CAIRN_HEAP_PROFILE set, a running cairn writes
// a heap profile there on SIGUSR1 and keeps running, and writes it again
// when it stops; both are gzipped pprof profiles with the heap's sample
// types.
func TestRun_HeapProfile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "heap.pprof")
	p := startCairnEnv(t, cairnBinary.get(t), writeConfig(t, filepath.Join(dir, "data"), testDefaults("")), []string{heapProfileEnv + "=" + prof})
	written := func(what string) {
		t.Helper()
		var body []byte
		waitUntil(t, 10*time.Second, what, func() (bool, string) {
			b, err := os.ReadFile(prof)
			body = b
			return err == nil, "no profile"
		})
		checkHeapProfile(t, body)
	}
	written("the profile written at the start")
	if err := os.Remove(prof); err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	written("the profile written on SIGUSR1")
	// Still serving.
	if got := newAPIClient(p.http).status(t); got.MQTT.Mode == "" {
		t.Fatalf("status after SIGUSR1 names no MQTT mode: %+v", got)
	}
	if err := os.Remove(prof); err != nil {
		t.Fatal(err)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn stopped with %v\n%s", err, p.out)
	}
	written("the profile written at the stop")
}

// checkHeapProfile fails the test unless b is a gzipped pprof profile
// naming the heap profile's sample types.
func checkHeapProfile(t *testing.T, b []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("profile is not gzipped: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"inuse_space", "alloc_space", "inuse_objects"} {
		if !bytes.Contains(raw, []byte(s)) {
			t.Fatalf("profile has no sample type %s", s)
		}
	}
}
