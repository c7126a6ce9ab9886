// cairn's regression test of patches/0012-table-index-builder-sized.patch:
// it fails without it (a table of a hundred keys allocated 3 MiB for its
// index).

package table

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/dgraph-io/badger/v4/y"
)

// TestSmallTableIndexAllocatesLittle: finishing a table of a hundred
// small keys allocates far less than a MiB. The release began every
// table's index with a builder of 3 MiB, which a small store's flushes
// paid each time.
func TestSmallTableIndexAllocatesLittle(t *testing.T) {
	opts := Options{BlockSize: 4 << 10, BloomFalsePositive: 0.01, TableSize: 2 << 20}
	b := NewTableBuilder(opts)
	defer b.Close()
	for i := range 100 {
		b.Add(y.KeyWithTs([]byte(fmt.Sprintf("key%05d", i)), 1), y.ValueStruct{Value: []byte("value")}, 0)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bd := b.Done()
	runtime.ReadMemStats(&after)
	if bd.Size == 0 {
		t.Fatal("the table is empty")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("finishing a table of %d bytes allocated %d bytes, want under 1 MiB", bd.Size, got)
	}
}
