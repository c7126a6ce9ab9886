// Added for cairn to the v4.9.6 release: see CAIRN.md in the module's root.

package badger

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives the first size bytes of f blocks on disk. Badger writes
// its memtable logs, value logs and discard stats through memory maps of
// files made at their full size with ftruncate, which leaves them sparse:
// a page of such a map that the file system cannot back when it is
// first written is a SIGBUS, which kills the process, not an error. With
// the blocks allocated up front, a full file system fails the allocation
// with ENOSPC instead, when the file is made.
//
// fresh says that f holds only zeros (a file just made). A file system
// that cannot allocate without writing (fallocate unsupported) then gets
// a zero written into each block; an older file there is left as it is.
func allocate(f *os.File, size int64, fresh bool) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	if !fresh {
		return nil
	}
	const block = 4096
	zero := []byte{0}
	for off := int64(0); off < size; off += block {
		if _, err := f.WriteAt(zero, off); err != nil {
			return err
		}
	}
	return nil
}
