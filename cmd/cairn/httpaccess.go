package main

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/cairn-gateway/cairn/gateway"
)

// minHTTPTokenLen is the shortest http.token_file that cairn takes: 16
// random characters are out of reach of guessing at the rate the API
// lets a client fail (see docs/security.md).
const minHTTPTokenLen = 16

// hostNameRE is a DNS name of letters, digits, hyphens and underscores,
// its labels joined by dots.
var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$`)

// validateHTTPAccess checks who may reach the HTTP API: http.listen off
// loopback needs a token, or allow_anonymous: true and the names clients
// use in http.allowed_hosts, which are host names or IP addresses without
// a port. bad reports a problem.
func (c *Config) validateHTTPAccess(bad func(key, format string, a ...any)) {
	h := c.HTTP
	for i, name := range h.AllowedHosts {
		if !validAllowedHost(name) {
			bad(fmt.Sprintf("http.allowed_hosts[%d]", i), "want a host name or an IP address, without scheme or port, such as gateway.local or 192.168.1.20 (got %q)", name)
		}
	}
	if h.AllowAnonymous && h.TokenFile != "" {
		bad("http.allow_anonymous", "true, but http.token_file is set: set one or the other")
	}
	if h.TokenFile != "" || gateway.IsLoopback(h.Listen) {
		return
	}
	if !h.AllowAnonymous {
		bad("http.listen", "%s is not loopback, and without a token anyone on the network could read the API: set http.token_file (see docs/security.md, Opening HTTP to the network), or allow_anonymous: true to let anyone in", h.Listen)
	} else if len(h.AllowedHosts) == 0 {
		bad("http.allowed_hosts", "http.listen %s is open without a token, which answers only loopback host names and these: list the names clients use to reach it, such as [gateway.local, 192.168.1.20]", h.Listen)
	}
}

// validAllowedHost reports whether name may be an entry of
// http.allowed_hosts: a host name or an IP address, without a port.
func validAllowedHost(name string) bool {
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")); err == nil {
		return ip.Zone() == ""
	}
	return len(name) <= 253 && hostNameRE.MatchString(name)
}

// anonymousHTTPBeyondLoopback reports whether the HTTP API is open without
// a token to other hosts: allow_anonymous is true and http.listen is not
// on loopback.
func anonymousHTTPBeyondLoopback(h HTTPConfig) bool {
	return h.AllowAnonymous && h.TokenFile == "" && !gateway.IsLoopback(h.Listen)
}

// checkHTTPToken refuses a token in file too short to be secret.
func checkHTTPToken(file string, token []byte) error {
	if n := len([]rune(string(token))); n < minHTTPTokenLen {
		p := secretPath(file)
		return fmt.Errorf("%s holds a token of %d characters, too short to be secret: it must have at least %d; make one with: (umask 077; head -c 24 /dev/urandom | base64 > %s)", p, n, minHTTPTokenLen, p)
	}
	return nil
}
