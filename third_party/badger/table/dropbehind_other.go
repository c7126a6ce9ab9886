// Added for cairn to the v4.9.6 release: see CAIRN.md in the module's root.

//go:build !linux

package table

// dropBehind does nothing but on Linux (see dropbehind_linux.go).
func (t *Table) dropBehind(idx int) {}
