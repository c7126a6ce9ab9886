// cairn's regression test of patches/0013-table-builder-without-pool.patch:
// it fails without it (a store opened with TableBuilderPool 0 still had a
// pool, whose builders each took an allocator of twice the table size).

package badger

import "testing"

// TestNoTableBuilderPool: a store opened with TableBuilderPool 0 has no
// pool of builders' buffers, so that its builders allocate each block on
// their own; with a pool size, it has one.
func TestNoTableBuilderPool(t *testing.T) {
	for _, n := range []int{0, 2} {
		db, err := Open(DefaultOptions(t.TempDir()).WithTableBuilderPool(n).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := db.allocPool != nil; got != (n > 0) {
			t.Errorf("TableBuilderPool %d: a pool is %v, want %v", n, got, n > 0)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
