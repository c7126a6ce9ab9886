package buffer

import "golang.org/x/sys/unix"

// KernelSync says whether the kernel's clock is synchronised, as
// timedatectl does (systemd's ntp_synced): adjtimex's maximum error is
// below 16 s, the kernel's "unsynchronised" value. An NTP daemon
// (systemd-timesyncd, chrony, ntpd) keeps it lower; a board that booted
// without a real-time clock and has not reached a time server has it.
func KernelSync() SyncState {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return SyncUnknown
	}
	if tx.Maxerror < 16_000_000 {
		return SyncYes
	}
	return SyncNo
}
