package buffer

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
)

// tableResident is the resident bytes of the store's table mappings, from
// /proc/self/smaps.
func tableResident(t *testing.T, s *Store) int64 {
	t.Helper()
	return mappedResident(t, func(path string) bool {
		_, isTable := tableFileID(filepath.Base(path))
		return isTable && filepath.Dir(path) == s.mapsDir
	})
}

// mappedResident is the resident bytes of the file mappings whose path
// mapped says are wanted, from /proc/self/smaps.
func mappedResident(t *testing.T, mapped func(path string) bool) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	wanted := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Bytes()
		if key, _, _ := bytes.Cut(line, []byte(" ")); !bytes.HasSuffix(key, []byte(":")) {
			// A mapping's first line, anonymous ones included.
			_, _, path, ok := parseMapping(line)
			wanted = ok && mapped(path)
			continue
		}
		if kb, ok := bytes.CutPrefix(line, []byte("Rss:")); ok && wanted {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(kb, []byte("kB")))), 10, 64)
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			total += n << 10
		}
	}
	return total
}

// TestBadgerTable_CompactionReadsGiveBackTheirPages writes a table the
// way cairn's build of Badger does and reads it through, as a compaction
// does (table.NOCACHE) and as a query does: the table just written is not
// resident, what a compaction's iterator read is given back, and what any
// other reader read stays (the mapping is measured right).
func TestBadgerTable_CompactionReadsGiveBackTheirPages(t *testing.T) {
	pool := z.NewAllocatorPool(1)
	defer pool.Release()
	b := table.NewTableBuilder(table.Options{BlockSize: tableBlockSize, TableSize: 8 << 20,
		BloomFalsePositive: 0.01, AllocPool: pool})
	defer b.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	val := make([]byte, 200)
	for i := range 20_000 {
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		b.Add(y.KeyWithTs(fmt.Appendf(nil, "key-%08d", i), 1), y.ValueStruct{Value: val}, 0)
	}
	name := table.NewFilename(1, t.TempDir())
	tbl, err := table.CreateTable(name, b)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tbl.DecrRef(); err != nil {
			t.Error(err)
		}
	}()
	size := tbl.Size()
	resident := func() int64 {
		return mappedResident(t, func(path string) bool { return path == name })
	}
	readAll := func(opt int) (n int) {
		it := tbl.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if len(it.Value().Value) == len(val) {
				n++
			}
		}
		return n
	}
	written := resident()
	if n := readAll(table.NOCACHE); n != 20_000 {
		t.Fatalf("read %d entries back, want 20000", n)
	}
	compacted := resident()
	readAll(0)
	queried := resident()
	t.Logf("table of %d bytes: resident %d once written, %d after a compaction's read, %d after another's", size, written, compacted, queried)
	if written > size/8 || compacted > size/8 {
		t.Errorf("table of %d bytes: %d resident once written, %d after a compaction read it; want under an eighth", size, written, compacted)
	}
	if queried < size/2 {
		t.Errorf("table of %d bytes: %d resident after an iterator that caches read it all; the measure is wrong", size, queried)
	}
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

// TestStore_CompactionsLeaveNoTablePages stores enough readings for
// Badger to flush and compact several tables, releases what was read of
// them (roll-ups read minute records back), and has Badger compact the
// levels into one: the tables that compaction wrote (with write(2), then
// mapped) must not stay in the resident set, only what opening a table
// reads of it (its index, its last block). While Badger's own compactions
// keep up with the writes, there is nothing left to compact: more
// readings are written until there is.
func TestStore_CompactionsLeaveNoTablePages(t *testing.T) {
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20}, WriterOptions{SealCheck: 24 * time.Hour})
	want := tableReadings(1_000_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		// Noisier than a counter, so more bytes; small enough integers
		// that sums and sums of squares come out exact in any order.
		want[i].Value = float64(rng.IntN(1 << 18))
	}
	written := 0
	writeUpTo := func(n int) {
		for ; written < n; written += 5000 {
			write(t, w, want[written:written+5000]...)
		}
		checkpoint(t, w)
	}
	isTable := func(path string, after uint64) bool {
		id, ok := tableFileID(filepath.Base(path))
		return ok && id > after && filepath.Dir(path) == s.mapsDir
	}
	writeUpTo(600_000)
	var last uint64 // the newest table before the compaction
	var tables []string
	for len(tables) == 0 {
		if written == len(want) {
			t.Fatalf("no compaction into one level after %d readings; the test needs more", written)
		}
		writeUpTo(written + 40_000)
		if _, err := s.ReleaseTablePages(); err != nil {
			t.Fatal(err)
		}
		last = 0
		for _, id := range s.db.TableIDs() {
			last = max(last, id)
		}
		if err := s.db.Flatten(1); err != nil {
			t.Fatal(err)
		}
		names, err := filepath.Glob(filepath.Join(s.mapsDir, "*.sst"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if isTable(name, last) {
				tables = append(tables, name)
			}
		}
	}
	var size int64
	for _, name := range tables {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	resident := mappedResident(t, func(path string) bool { return isTable(path, last) })
	t.Logf("after %d readings: %d bytes of %d resident in the %d tables the compaction wrote", written, resident, size, len(tables))
	if resident > size/4 {
		t.Errorf("pages resident of the %d tables a compaction wrote: %d bytes of %d", len(tables), resident, size)
	}
	checkStored(t, s, want[:written])
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
