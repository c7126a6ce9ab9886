// cairn's regression test of patches/0013-table-builder-without-pool.patch:
// it fails without it (a builder without a pool took an allocator of twice
// the table size, then a buffer twice as large again).

package table

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/dgraph-io/badger/v4/y"
)

// TestBuilderWithoutPoolHoldsItsTable: a builder without a pool (what a
// store opened with TableBuilderPool 0 gives it) allocates about what its
// table holds. The table here is a little larger than twice the table
// size, as a flushed memtable's is in a small store: the release's
// builder began an allocator at twice the table size and then added a
// buffer twice as large, six times the table size.
func TestBuilderWithoutPoolHoldsItsTable(t *testing.T) {
	const tableSize = 1 << 20
	opts := Options{BlockSize: 64 << 10, BloomFalsePositive: 0.01, TableSize: tableSize}
	value := make([]byte, 200)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := NewTableBuilder(opts)
	defer b.Close()
	key := make([]byte, 16)
	for i := range 10_000 { // about 2.2 MiB: a flushed memtable of twice the table size
		binary.BigEndian.PutUint64(key, uint64(i))
		b.Add(y.KeyWithTs(key, 1), y.ValueStruct{Value: value}, 0)
	}
	bd := b.Done()
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("a table of %d bytes: the builder allocated %d bytes", bd.Size, got)
	if bd.Size < 2*tableSize {
		t.Fatalf("a table of %d bytes; the test needs one larger than twice the table size", bd.Size)
	}
	if got > uint64(bd.Size)*3/2 {
		t.Errorf("a table of %d bytes: the builder allocated %d bytes, want at most 1.5 times the table", bd.Size, got)
	}
}
