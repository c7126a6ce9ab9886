// cairn's regression test of patches/0016-table-builder-writes-its-file.patch:
// it fails without it (a memtable flush allocated every block of its table
// and held them all until the table was written).

package badger

import (
	"encoding/binary"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
)

// TestFlushWritesBlocksAsItGoes: flushing a memtable of 2.2 MiB to an
// uncompressed table (as cairn's are) allocates far less than the table, since each block goes to the
// file as it is finished and its buffer serves the next; the release's
// builder allocated, and held, every block. The table then reads back
// every key and value from level 0.
func TestFlushWritesBlocksAsItGoes(t *testing.T) {
	opt := DefaultOptions(t.TempDir()).WithLogger(nil).WithNumCompactors(0).
		WithMemTableSize(8 << 20).WithTableBuilderPool(0).WithCompression(options.None).WithBlockCacheSize(0)
	db, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mt, err := db.newMemTable()
	if err != nil {
		t.Fatal(err)
	}
	defer mt.DecrRef()
	const n = 10_000
	value := make([]byte, 200)
	key := make([]byte, 16)
	for i := range n {
		binary.BigEndian.PutUint64(key, uint64(i))
		binary.BigEndian.PutUint64(value, uint64(i))
		if err := mt.Put(y.KeyWithTs(append([]byte(nil), key...), 1), y.ValueStruct{Value: append([]byte(nil), value...)}); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := db.handleMemTableFlush(mt, nil); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	tables := db.Tables()
	if len(tables) != 1 || tables[0].Level != 0 {
		t.Fatalf("after the flush: tables %+v, want one in level 0", tables)
	}
	size := tables[0].OnDiskSize
	t.Logf("a flush to a table of %d bytes allocated %d bytes", size, allocated)
	if size < 2<<20 {
		t.Fatalf("a table of %d bytes; the test needs one of more than 2 MiB", size)
	}
	if allocated > uint64(size)/3 {
		t.Errorf("a flush to a table of %d bytes allocated %d bytes; want at most a third of the table", size, allocated)
	}
	// Every entry reads back, and no other file of a table was left.
	tbl := db.lc.levels[0].tables[0]
	it := tbl.NewIterator(0)
	defer it.Close()
	i := 0
	for it.Rewind(); it.Valid(); it.Next() {
		binary.BigEndian.PutUint64(key, uint64(i))
		if got := y.ParseKey(it.Key()); string(got) != string(key) || binary.BigEndian.Uint64(it.Value().Value) != uint64(i) {
			t.Fatalf("entry %d: key %x value %x…", i, got, it.Value().Value[:8])
		}
		i++
	}
	if i != n {
		t.Errorf("the table reads back %d entries, want %d", i, n)
	}
	ents, err := os.ReadDir(opt.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ssts := 0
	for _, e := range ents {
		if len(e.Name()) > 4 && e.Name()[len(e.Name())-4:] == ".sst" {
			ssts++
		}
	}
	if ssts != 1 {
		t.Errorf("%d table files in the directory, want 1", ssts)
	}
}

// TestFlushCompressedLeavesNoBuilder: a flush to a compressed table (its
// blocks compressed in the background, by goroutines of the builder)
// leaves none of the builder's goroutines behind: one builder is made
// for the table and it is finished.
func TestFlushCompressedLeavesNoBuilder(t *testing.T) {
	opt := DefaultOptions(t.TempDir()).WithLogger(nil).WithNumCompactors(0).
		WithMemTableSize(8 << 20).WithTableBuilderPool(0).WithCompression(options.Snappy).WithBlockCacheSize(1 << 20)
	db, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mt, err := db.newMemTable()
	if err != nil {
		t.Fatal(err)
	}
	defer mt.DecrRef()
	key := make([]byte, 16)
	for i := range 1000 {
		binary.BigEndian.PutUint64(key, uint64(i))
		if err := mt.Put(y.KeyWithTs(append([]byte(nil), key...), 1), y.ValueStruct{Value: make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.handleMemTableFlush(mt, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for range 50 {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "table.(*Builder).handleBlock") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("after the flush, a table builder's goroutines are still waiting for blocks: a builder was made and never finished")
}
