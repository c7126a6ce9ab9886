//go:build !unix

package dashboard

// cpuNanos returns 0: the CPU time is not measured here.
func cpuNanos() int64 { return 0 }
