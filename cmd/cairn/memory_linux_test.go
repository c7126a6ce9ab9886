package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// residentFileBytes sees a mapped file's pages enter the resident set as
// they are read and leave it when released, as the trigger needs, and
// does not count anonymous memory.
func TestResidentFileBytes(t *testing.T) {
	const size = 16 << 20
	f, err := os.Create(filepath.Join(t.TempDir(), "table"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)

	before := mustResidentFileBytes(t)
	var sum byte
	for i := 0; i < size; i += os.Getpagesize() {
		sum += m[i]
	}
	read := mustResidentFileBytes(t)
	if read-before < size*3/4 {
		t.Fatalf("resident file bytes %d before reading a 16 MiB mapping and %d after, want at least 12 MiB more (sum %d)", before, read, sum)
	}
	if err := unix.Madvise(m, unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	released := mustResidentFileBytes(t)
	if read-released < size*3/4 {
		t.Errorf("resident file bytes %d with the mapping read and %d after releasing it, want at least 12 MiB fewer", read, released)
	}

	// Anonymous memory, the heap's, is not counted.
	anon, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(anon)
	for i := 0; i < size; i += os.Getpagesize() {
		anon[i] = 1
	}
	if written := mustResidentFileBytes(t); written-released > size/4 {
		t.Errorf("resident file bytes %d before writing 16 MiB of anonymous memory and %d after, want at most 4 MiB more", released, written)
	}
}

func mustResidentFileBytes(t *testing.T) int64 {
	t.Helper()
	n, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
