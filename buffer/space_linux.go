package buffer

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives the first size bytes of f, a new file, blocks on disk.
func allocate(f *os.File, size int64) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
