package gateway

import (
	"net"
	"testing"
)

// TestBoundAddress: a listener is shown at its configured host with the
// port it was bound to.
func TestBoundAddress(t *testing.T) {
	for _, tc := range []struct {
		configured string
		bound      net.Addr
		want       string
	}{
		{"0.0.0.0:1883", &net.TCPAddr{IP: net.IPv6zero, Port: 1883}, "0.0.0.0:1883"},
		{"127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}, "127.0.0.1:41234"},
		{"[::1]:8080", &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, "[::1]:8080"},
		{":8080", &net.TCPAddr{IP: net.IPv6zero, Port: 8080}, ":8080"},
	} {
		if got := BoundAddress(tc.configured, tc.bound); got != tc.want {
			t.Errorf("BoundAddress(%q, %s) = %q, want %q", tc.configured, tc.bound, got, tc.want)
		}
	}
}
