// cairn's regression test of patches/0015-one-goroutine-writes-requests.patch:
// it fails without it (every group of write requests was written by a
// goroutine started for it).

package badger

import (
	"fmt"
	"runtime/metrics"
	"testing"
)

// TestWritesOnOneGoroutine: committing transactions one after another
// starts no goroutine for each; before, each commit's group of requests
// was written by a goroutine of its own.
func TestWritesOnOneGoroutine(t *testing.T) {
	db, err := Open(DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			db.Close()
		}
	}()
	created := func() uint64 {
		s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	const commits = 200
	before := created()
	for i := range commits {
		if err := db.Update(func(txn *Txn) error {
			return txn.Set([]byte(fmt.Sprintf("key%04d", i)), []byte("value"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := created() - before; n >= commits/2 {
		t.Errorf("%d commits started %d goroutines; want fewer than %d", commits, n, commits/2)
	}
	// Every write is still there, and Close, which writes what is
	// pending on the goroutine that gathers, returns without an error.
	if err := db.View(func(txn *Txn) error {
		for i := range commits {
			if _, err := txn.Get([]byte(fmt.Sprintf("key%04d", i))); err != nil {
				return fmt.Errorf("key%04d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
