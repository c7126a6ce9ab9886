// Added for cairn to the v4.9.6 release: see CAIRN.md in the module's root.

//go:build !linux

package skl

// mapArena is the Go heap's make where arenas are not mapped on their
// own (arena_map_linux.go).
func mapArena(n int64) (buf []byte, unmap func()) {
	return make([]byte, n), func() {}
}
