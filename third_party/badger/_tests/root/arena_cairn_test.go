// cairn's regression test of patches/0017-memtable-arena-outside-the-heap.patch:
// it fails without it (a memtable's arena was a slice of the Go heap).

package badger

import (
	"bytes"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
)

// heapObjects is the bytes of the Go heap's objects, live or not yet
// swept.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestMemtableArenaOutsideHeap: a DB with 64 MiB memtables adds far less
// than that to the Go heap; the release's arena was a 64 MiB slice of it.
func TestMemtableArenaOutsideHeap(t *testing.T) {
	before := heapObjects()
	db, err := Open(DefaultOptions(t.TempDir()).WithLogger(nil).WithMemTableSize(64 << 20).
		WithCompression(options.None).WithBlockCacheSize(0).WithIndexCacheSize(0))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	grew := int64(heapObjects()) - int64(before)
	t.Logf("Open with 64 MiB memtables: heap objects %+d bytes", grew)
	if grew > 16<<20 {
		t.Errorf("Open with 64 MiB memtables: the Go heap grew by %d bytes; want the arena outside it", grew)
	}
	if err := db.Update(func(txn *Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(txn *Txn) error {
		it, err := txn.Get([]byte("k"))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if string(v) != "v" {
				return fmt.Errorf("value %q, want v", v)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGetWhileMemtablesAreFlushed: readers get keys, and keep their
// values, while small memtables fill, are flushed and released (their
// arenas unmapped) under them: every value read is whole and right.
func TestGetWhileMemtablesAreFlushed(t *testing.T) {
	db, err := Open(DefaultOptions(t.TempDir()).WithLogger(nil).WithMemTableSize(1 << 20).
		WithNumMemtables(2).WithNumLevelZeroTables(2).WithNumLevelZeroTablesStall(4).WithValueThreshold(1 << 10))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%08d", i)), 64) }
	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var kept [][]byte
			var keys []int
			for n := 0; ; n++ {
				select {
				case <-stop:
					for j, v := range kept {
						if !bytes.Equal(v, value(keys[j])) {
							errs <- fmt.Errorf("key %d: a value kept after its read changed", keys[j])
							return
						}
					}
					return
				default:
				}
				w := int(written.Load())
				if w == 0 {
					continue
				}
				i := (n * 7919) % w
				err := db.View(func(txn *Txn) error {
					it, err := txn.Get([]byte(fmt.Sprintf("key%08d", i)))
					if err != nil {
						return err
					}
					v, err := it.ValueCopy(nil)
					if err != nil {
						return err
					}
					if !bytes.Equal(v, value(i)) {
						return fmt.Errorf("key %d: value %.16q…, want %.16q…", i, v, value(i))
					}
					if n%50 == 0 {
						kept, keys = append(kept, v), append(keys, i)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 40000; i += 100 {
		if err := db.Update(func(txn *Txn) error {
			for j := i; j < i+100; j++ {
				if err := txn.Set([]byte(fmt.Sprintf("key%08d", j)), value(j)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		written.Store(int64(i + 100))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
