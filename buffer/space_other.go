//go:build !linux

package buffer

import "os"

// allocate gives the first size bytes of f, a new file, blocks on disk,
// by writing a zero into each block.
func allocate(f *os.File, size int64) error {
	zero := []byte{0}
	for off := int64(0); off < size; off += 4096 {
		if _, err := f.WriteAt(zero, off); err != nil {
			return err
		}
	}
	return nil
}
