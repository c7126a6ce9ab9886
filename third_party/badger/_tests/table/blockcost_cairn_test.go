// cairn's regression test of patches/0020-block-costs-its-own-bytes.patch:
// it fails without it (a block of an uncompressed table cost the rest of
// its table in the block cache).

package table

import (
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2"
)

// TestUncompressedBlockCostsItsBytes: a block of an uncompressed table
// costs about its own bytes, so a cache of 1 MiB keeps the 16 blocks of
// 4 KiB read into it. The release's block was a slice of the table that
// ran to the table's end, and so was its checksum: the first block of a
// 2.4 MB table cost 4.9 MB, and the cache kept none of them.
func TestUncompressedBlockCostsItsBytes(t *testing.T) {
	cache, err := ristretto.NewCache(&ristretto.Config[[]byte, *Block]{
		NumCounters: 1 << 12, MaxCost: 1 << 20, BufferItems: 64, OnExit: BlockEvictHandler,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	opts := Options{BlockSize: 4 << 10, BloomFalsePositive: 0.01, TableSize: 4 << 20,
		Compression: options.None, BlockCache: cache}
	b := NewTableBuilder(opts)
	defer b.Close()
	value := make([]byte, 100)
	for i := range 20000 { // 2.4 MB
		b.Add(y.KeyWithTs([]byte(fmt.Sprintf("key%08d", i)), 1), y.ValueStruct{Value: value}, 0)
	}
	tbl, err := OpenInMemoryTable(b.Finish(), 1, &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.DecrRef()
	if n := tbl.offsetsLength(); n < 100 {
		t.Fatalf("the table has %d blocks, want at least 100", n)
	}
	const blocks = 16
	for i := range blocks {
		blk, err := tbl.block(i, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := blk.size(); got > 2*int64(opts.BlockSize) {
			t.Errorf("block %d of a %d-byte table costs %d bytes, want about its %d", i, tbl.Size(), got, len(blk.data))
		}
		blk.decrRef()
	}
	cache.Wait()
	kept := 0
	for i := range blocks {
		if _, ok := cache.Get(tbl.blockCacheKey(i)); ok {
			kept++
		}
	}
	if kept != blocks {
		t.Errorf("a cache of 1 MiB kept %d of %d blocks of 4 KiB", kept, blocks)
	}
}
