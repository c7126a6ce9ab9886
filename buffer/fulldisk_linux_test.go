package buffer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fullDiskChildEnv makes the test binary run TestStore_FullDiskIsAnError's
// scenario itself: a SIGBUS kills the process it happens in, and the
// parent sees that as a failure, not as the end of the test binary.
const fullDiskChildEnv = "CAIRN_FULL_DISK_CHILD"

// TestStore_FullDiskIsAnError writes to a store on a small tmpfs until the
// file system is full. Commits must fail with ENOSPC, never a SIGBUS;
// every commit that succeeded must be readable; once space is freed the
// same store must take writes again; the store must close on the full
// disk; and it must open again with everything in it. Before Badger's
// files were allocated up front, this died of SIGBUS in the memtable's
// log.
func TestStore_FullDiskIsAnError(t *testing.T) {
	if dir := os.Getenv(fullDiskChildEnv); dir != "" {
		fullDiskScenario(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs: run it as root (scripts/test.sh does)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=24m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_FullDiskIsAnError$", "-test.v")
	cmd.Env = append(os.Environ(), fullDiskChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "SIGBUS") {
		t.Fatalf("the store on a full disk: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "fulldisk_linux_test.go") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func fullDiskScenario(t *testing.T, dir string) {
	ctx := context.Background()
	data := filepath.Join(dir, "data")
	filler := filepath.Join(dir, "filler")
	s, err := Open(Options{Dir: data, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{SealCheck: time.Hour, CheckpointInterval: 10 * time.Millisecond})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	// Leave a few MiB: the store fills them.
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	free, err := FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, free-6<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	submit := func(rs []Reading) error {
		ch := make(chan Result, 1)
		if err := w.Submit(ctx, rs, func(r Result) { ch <- r }); err != nil {
			return err
		}
		return (<-ch).Err
	}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	batch := func(i int) []Reading {
		rs := make([]Reading, 500)
		for k := range rs {
			rs[k] = Reading{Device: fmt.Sprintf("d%d", k%50), Metric: "m", TS: base + int64(i*500+k)*1e6, Value: float64(i*500 + k)}
		}
		return rs
	}
	var stored []int
	var failure error
	failed := -1 // the batch whose commit failed
	for i := 0; i < 100000 && failure == nil; i++ {
		if err := submit(batch(i)); err != nil {
			failure, failed = err, i
		} else {
			stored = append(stored, i)
		}
	}
	if failure == nil || !isNoSpace(failure) {
		t.Fatalf("after %d commits: %v; want a commit to fail for want of space", len(stored), failure)
	}
	t.Logf("%d commits stored, then: %v", len(stored), failure)

	// Space comes back: the same store takes writes again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	next := len(stored) + 1000
	var err2 error
	for try := 0; try < 50; try++ {
		if err2 = submit(batch(next)); err2 == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err2 != nil {
		t.Fatalf("after space was freed: %v", err2)
	}
	stored = append(stored, next)

	// Full again, and the store closes all the same.
	f, err = os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	if free, err = FreeBytes(dir); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, free); err != nil && !errors.Is(err, unix.ENOSPC) {
		t.Fatal(err)
	}
	f.Close()
	closed := make(chan error, 1)
	go func() {
		stop()
		<-done
		closed <- s.Close()
	}()
	select {
	case err := <-closed:
		t.Logf("closed on a full disk: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the store did not close on a full disk in 30s")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	s, err = Open(Options{Dir: data, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	missing := 0
	for _, i := range stored {
		for _, r := range batch(i)[:1] {
			got, err := s.Readings(Query{Device: r.Device, Metric: r.Metric, From: r.TS, To: r.TS + 1, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Value != r.Value {
				missing++
			}
		}
	}
	// A commit too big for one Badger transaction goes in parts, each
	// synced: when a later part fails, the earlier ones stay (readings are
	// idempotent, and the batch, not acknowledged, comes again). The
	// failed batch's readings that are stored are counted too.
	partial := 0
	for _, r := range batch(failed) {
		got, err := s.Readings(Query{Device: r.Device, Metric: r.Metric, From: r.TS, To: r.TS + 1, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0].Value == r.Value {
			partial++
		}
	}
	if want := uint64(len(stored)*500 + partial); s.ReadingCount() != want || missing > 0 {
		t.Errorf("after reopening: %d readings counted, want %d (%d of the failed commit); %d of %d commits checked are missing",
			s.ReadingCount(), want, partial, missing, len(stored))
	}
	t.Logf("%d readings of the failed commit were stored by its parts before it failed", partial)
}
