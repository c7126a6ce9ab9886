// Added for cairn to the v4.9.6 release: see CAIRN.md in the module's root.

package skl

import "golang.org/x/sys/unix"

// mapArena returns an arena of n bytes mapped on its own, outside the Go
// heap, and what unmaps it. A memtable's arena is most of what a small
// gateway keeps live in its heap, and the collector lets the heap grow
// to twice what is live before it runs: outside the heap, the arena
// costs the pages written into it and nothing more, and is given back
// to the system as soon as its memtable is released, not when a
// collection and the scavenger get to it.
func mapArena(n int64) (buf []byte, unmap func()) {
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]byte, n), func() {}
	}
	return b, func() { _ = unix.Munmap(b) }
}
