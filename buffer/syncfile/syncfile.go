// Package syncfile writes whole files that are on disk, synced, before
// the call returns: what cairn writes beside its store (parked batches, a
// password file) must outlast a power cut as much as the store does.
package syncfile

import (
	"os"
	"path/filepath"
)

// Write writes data to the file name, creating it with perm or truncating
// it, and syncs it before closing it. It does not sync the directory: a
// caller that creates files syncs their directory itself.
func Write(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	return writeClose(f, data)
}

// Replace replaces the file name with data as one change: a temporary file
// in the same directory, with mode perm, is written and synced, then
// renamed over name. A reader sees the old file or the new one, never a
// part of either.
func Replace(name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails once renamed
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := writeClose(f, data); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// writeClose writes data to f, syncs f and closes it. f is closed
// whatever fails.
func writeClose(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
