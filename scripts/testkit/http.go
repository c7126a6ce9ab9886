package testkit

import (
	"net"
	"net/http"
	"time"
)

// HTTPClientFrom returns an HTTP client whose connections come from the
// local address ip, such as 127.0.0.2 (Linux answers all of 127.0.0.0/8
// on loopback), so that a test can be several clients to a server that
// tells them apart by address. It does not follow redirects, and keeps
// no connection open between requests, so none outlives a test.
func HTTPClientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
