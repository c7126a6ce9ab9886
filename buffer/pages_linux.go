package buffer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// Badger maps each table file into memory and, but for a compaction's
// reads (see badger/CAIRN.md), never unmaps a page it has touched: what
// opening a table, queries, the outbox and sealing read of it stays in
// the process's resident set until the table is deleted, although every
// such page is the kernel's page cache of a file on disk and nothing of
// cairn's own.
//
// ReleaseTablePages unmaps those pages (madvise MADV_DONTNEED on the
// store's table mappings, which are shared file mappings): the file and
// the page cache keep their contents, written or not, and the next read of
// a page maps it again from the cache, or reads it from the disk if the
// kernel needed the memory meanwhile. It returns the bytes of table
// mappings it went over.
//
// A mapping must still be a table's when it is released: unmapped and its
// addresses reused for the heap, it would be zeroed. So an iterator over
// the whole tree holds every table open (Badger unmaps a table when its
// last reference goes), and only tables listed both before and after it
// was opened, and so held by it, are released.
func (s *Store) ReleaseTablePages() (int64, error) {
	if s.mapsDir == "" {
		return 0, nil
	}
	before := s.db.TableIDs()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	held := make(map[uint64]bool, len(before))
	for _, id := range before {
		held[id] = false
	}
	for _, id := range s.db.TableIDs() {
		if _, ok := held[id]; ok {
			held[id] = true
		}
	}

	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("release table pages: %w", err)
	}
	var released int64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		start, end, path, ok := parseMapping(sc.Bytes())
		if !ok || filepath.Dir(path) != s.mapsDir {
			continue
		}
		id, ok := tableFileID(filepath.Base(path))
		if !ok || !held[id] {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("release table pages of %s: %w", path, errno)
		}
		released += int64(end - start)
	}
	return released, nil
}

// parseMapping reads a line of /proc/self/maps,
// "start-end perms offset dev inode path", for the addresses and the path
// of a file mapping.
func parseMapping(line []byte) (start, end uintptr, path string, ok bool) {
	rest := line
	var f [5][]byte
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		n := bytes.IndexByte(rest, ' ')
		if n < 0 {
			return 0, 0, "", false // anonymous mappings have no path
		}
		f[i], rest = rest[:n], rest[n:]
	}
	path = string(bytes.TrimLeft(rest, " ")) // a deleted file's ends in " (deleted)"
	lo, hi, found := bytes.Cut(f[0], []byte("-"))
	if !found || path == "" {
		return 0, 0, "", false
	}
	a, err1 := strconv.ParseUint(string(lo), 16, 64)
	b, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || b <= a {
		return 0, 0, "", false
	}
	return uintptr(a), uintptr(b), path, true
}

// tableFileID is the table ID of a Badger table file's name, "000042.sst".
func tableFileID(name string) (uint64, bool) {
	num, found := bytes.CutSuffix([]byte(name), []byte(".sst"))
	if !found || len(num) == 0 {
		return 0, false
	}
	id, err := strconv.ParseUint(string(num), 10, 64)
	return id, err == nil
}
