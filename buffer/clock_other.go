//go:build !linux

package buffer

// KernelSync cannot say whether the clock is synchronised off Linux.
func KernelSync() SyncState { return SyncUnknown }
