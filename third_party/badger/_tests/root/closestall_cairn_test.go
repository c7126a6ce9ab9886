// cairn's regression test of patches/0018-close-wakes-a-stalled-flush.patch:
// it fails without it (Close waited for ever on a flush parked at level
// 0's stall).

package badger

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/options"
)

// TestCloseWithLevel0Stalled: with level 0 at its stall count and no
// compaction to bring it down (a full disk fails them all), the flush
// waits; a memtable queued behind it and a full one being written to
// leave Close no room to hand over the last. Close must still return:
// the flush, woken, sees the DB closing and adds its table.
func TestCloseWithLevel0Stalled(t *testing.T) {
	db, err := Open(DefaultOptions(t.TempDir()).WithLogger(nil).WithNumCompactors(0).
		WithMemTableSize(1 << 20).WithNumMemtables(2).WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(2).
		WithCompression(options.None).WithBlockCacheSize(0).WithValueThreshold(1 << 10))
	if err != nil {
		t.Fatal(err)
	}
	writes := make(chan error, 1)
	go func() {
		value := bytes.Repeat([]byte("v"), 1000)
		for i := 0; ; i += 100 {
			err := db.Update(func(txn *Txn) error {
				for j := i; j < i+100; j++ {
					if err := txn.Set([]byte(fmt.Sprintf("key%09d", j)), value); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				writes <- err
				return
			}
		}
	}()
	stalled := func() bool {
		return db.lc.levels[0].numTables() >= 2 && len(db.flushChan) == cap(db.flushChan)
	}
	for deadline := time.Now().Add(30 * time.Second); !stalled(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("level 0 not stalled after 30 s: %d tables, %d of %d memtables queued", db.lc.levels[0].numTables(), len(db.flushChan), cap(db.flushChan))
		}
	}
	time.Sleep(200 * time.Millisecond) // the writer fills the memtable it writes to
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		t.Logf("Close with level 0 stalled: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatalf("Close has not returned 20 s after it was called, with level 0 stalled (%d tables) and %d memtables queued", db.lc.levels[0].numTables(), len(db.flushChan))
	}
	select {
	case err := <-writes:
		t.Logf("the writes ended with: %v", err)
	case <-time.After(5 * time.Second):
		t.Error("a write still waits 5 s after Close returned")
	}
}
