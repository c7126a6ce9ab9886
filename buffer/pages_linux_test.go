package buffer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// tableResident is the resident bytes of the store's table mappings, from
// /proc/self/smaps.
func tableResident(t *testing.T, s *Store) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	table := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Bytes()
		if key, _, _ := bytes.Cut(line, []byte(" ")); !bytes.HasSuffix(key, []byte(":")) {
			// A mapping's first line, anonymous ones included.
			_, _, path, ok := parseMapping(line)
			_, isTable := tableFileID(filepath.Base(path))
			table = ok && isTable && filepath.Dir(path) == s.mapsDir
			continue
		}
		if kb, ok := bytes.CutPrefix(line, []byte("Rss:")); ok && table {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(kb, []byte("kB")))), 10, 64)
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			total += n << 10
		}
	}
	return total
}

// tableReadings are n readings of 50 devices, 1 Hz from a fixed day.
func tableReadings(n int) []Reading {
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).UnixNano()
	rs := make([]Reading, n)
	for i := range rs {
		rs[i] = Reading{Device: fmt.Sprintf("dev-%02d", i%50), Metric: "t", TS: base + int64(i/50)*1e9, Value: float64(i % 997)}
	}
	return rs
}

// TestStore_ReleaseTablePagesKeepsTheData stores enough readings for
// Badger to write tables, reads them all (which maps their pages), and
// releases the table pages: they leave the resident set, and every
// reading reads back the same.
func TestStore_ReleaseTablePagesKeepsTheData(t *testing.T) {
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20}, WriterOptions{SealCheck: 24 * time.Hour})
	want := tableReadings(200_000)
	for i := 0; i < len(want); i += 5000 {
		write(t, w, want[i:i+5000]...)
	}
	checkpoint(t, w)
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	if len(s.db.Tables()) == 0 {
		t.Fatal("no tables written; the test needs more readings")
	}
	checkStored(t, s, want)
	before := tableResident(t, s)
	if before < 64<<10 {
		t.Fatalf("table pages resident after reading everything: %d bytes; expected some", before)
	}
	// A compaction Badger starts meanwhile maps the pages it reads
	// again: a few tries.
	var after int64
	for range 10 {
		n, err := s.ReleaseTablePages()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("ReleaseTablePages went over no table mapping")
		}
		if after = tableResident(t, s); after <= before/10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after > before/10 {
		t.Errorf("table pages resident: %d bytes before, %d after releasing them", before, after)
	}
	checkStored(t, s, want)
}

// TestStore_ReleaseTablePagesWhileCompacting releases table pages without
// pause while commits, flushes and compactions create and delete tables:
// releasing a table that was unmapped meanwhile would zero whatever took
// its addresses (the heap, likely), and crash the test or change a
// reading.
func TestStore_ReleaseTablePagesWhileCompacting(t *testing.T) {
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20}, WriterOptions{SealCheck: 24 * time.Hour})
	want := tableReadings(300_000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var releases int
	var releaseErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.ReleaseTablePages(); err != nil {
				releaseErr = err
				return
			}
			releases++
		}
	})
	for i := 0; i < len(want); i += 5000 {
		write(t, w, want[i:i+5000]...)
		if i%50_000 == 0 {
			checkpoint(t, w)
			if err := s.db.Flatten(1); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkpoint(t, w)
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	t.Logf("%d releases", releases)
	checkStored(t, s, want)
}
