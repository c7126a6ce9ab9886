// Added for cairn to the v4.9.6 release: see CAIRN.md in the module's root.

package table

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/dgraph-io/badger/v4/fb"
)

var pageSize = os.Getpagesize()

// dropBehind unmaps the pages of block idx, which an iterator that does
// not cache (a compaction's) has read to its end: a compaction reads each
// of its input tables once, through the table's mapping, and the pages it
// touched would stay in the process's resident set until the table is
// deleted, megabytes a compaction. The page cache keeps them; a reader
// that still needs one maps it again from there. The pages are whole
// pages of the block, and the one it begins in: that one holds the end
// of the block before, which has been read too.
func (t *Table) dropBehind(idx int) {
	if t.IsInmemory || t.MmapFile == nil {
		return
	}
	var ko fb.BlockOffset
	if !t.offsets(&ko, idx) {
		return
	}
	start := int(ko.Offset()) / pageSize * pageSize
	end := (int(ko.Offset()) + int(ko.Len())) / pageSize * pageSize
	if start >= end || end > len(t.Data) {
		return
	}
	// Advice only: on an error the pages stay until the table is deleted.
	_ = unix.Madvise(t.Data[start:end], unix.MADV_DONTNEED)
}
