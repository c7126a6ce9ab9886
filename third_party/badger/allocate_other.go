// Added for cairn to the v4.9.6 release: see CAIRN.md in the module's root.

//go:build !linux

package badger

import "os"

// allocate gives the first size bytes of f blocks on disk (see
// allocate_linux.go): here by writing a zero into each block of a fresh
// file; an older file is left as it is.
func allocate(f *os.File, size int64, fresh bool) error {
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
