// cairn's regression test of patches/0019-a-failed-drop-prefix-keeps-its-memtables.patch:
// it fails without it (Close released a memtable twice, and with patch
// 0017 unmapped a memtable's arena twice: a crash).

package badger

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
)

// TestDropPrefixFlushFails: a DropPrefix whose flush cannot write its
// table (here the table's file name is taken by a directory; on a
// device, a full disk) fails, and leaves the DB whole: the writes
// before it read back, new writes go on, their memtables flush once
// tables can be written again, Close returns without an error, and
// everything is there after the next Open.
func TestDropPrefixFlushFails(t *testing.T) {
	dir := t.TempDir()
	opt := DefaultOptions(dir).WithLogger(nil).WithMemTableSize(1 << 20).WithNumMemtables(2).
		WithCompression(options.None).WithBlockCacheSize(0).WithValueThreshold(1 << 10)
	db, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i += 100 {
			if err := db.Update(func(txn *Txn) error {
				for j := i; j < min(i+100, to); j++ {
					if err := txn.Set([]byte(fmt.Sprintf("key%06d", j)), []byte(fmt.Sprintf("value%06d", j))); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(db *DB, n int) {
		t.Helper()
		if err := db.View(func(txn *Txn) error {
			for i := range n {
				it, err := txn.Get([]byte(fmt.Sprintf("key%06d", i)))
				if err != nil {
					return fmt.Errorf("key%06d: %w", i, err)
				}
				v, err := it.ValueCopy(nil)
				if err != nil || string(v) != fmt.Sprintf("value%06d", i) {
					return fmt.Errorf("key%06d: %q, %v", i, v, err)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(0, 1000)
	// The next table files cannot be made.
	var blocked []string
	for id := 1; id <= 64; id++ {
		p := filepath.Join(dir, fmt.Sprintf("%06d.sst", id))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		blocked = append(blocked, p)
	}
	if err := db.DropPrefix([]byte("key000")); err == nil {
		t.Fatal("DropPrefix with no table writable: no error")
	}
	check(db, 1000)
	put(1000, 2000)
	check(db, 2000)
	for _, p := range blocked {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	put(2000, 20000) // several memtables, flushed
	check(db, 20000)
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db, err = Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, 20000)
}
