package httpapi

import (
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Failed authentications (a wrong bearer token, a session cookie that is
// not a live session, a wrong token in the login form) are limited per
// client address: failBurst at once, then one per failEvery. An address
// over the limit is answered 429 whatever it sends, the right token too,
// until it may try again; other addresses are not affected.
const (
	failBurst = 10
	failEvery = time.Second
	// maxFailAddrs bounds the addresses whose failures are remembered.
	// When that many are still paying for theirs, the failures of the
	// others share one allowance, of failBurst then one per failEvery.
	maxFailAddrs = 4096
)

// failures keeps a token bucket of failed authentications for each client
// address that failed lately: IPv4 addresses one by one, IPv6 ones by /64,
// since one host commonly holds a whole /64. Buckets that are full again
// are dropped when the table is full. It is safe for concurrent use.
type failures struct {
	mu    sync.Mutex                 // guards addrs, other and swept
	addrs map[netip.Addr]*failBucket // by clientKey
	other failBucket                 // of the addresses beyond maxFailAddrs
	swept time.Time                  // when addrs was last swept of full buckets
}

// failBucket holds the failures an address may still make as of at:
// failBurst when full, below 1 when it must wait. Failures that passed
// the check together may take it below 0, which it then pays back.
type failBucket struct {
	tokens float64
	at     time.Time
}

// refill adds what failEvery gave the bucket since it was last filled.
func (b *failBucket) refill(now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = failBurst, now
		return
	}
	if now.After(b.at) {
		b.tokens = min(failBurst, b.tokens+float64(now.Sub(b.at))/float64(failEvery))
		b.at = now
	}
}

// clientKey is the key of r's client address in failures: the address
// of an IPv4 client, the /64 of an IPv6 one. A remote address that does
// not parse (not a TCP client) is the zero key.
func clientKey(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// wait returns how long the address key must wait before it may try to
// authenticate again: 0 when it may now.
func (f *failures) wait(key netip.Addr, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.addrs[key]
	if b == nil {
		if f.sweep(now); len(f.addrs) < maxFailAddrs {
			return 0
		}
		b = &f.other
	}
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(failEvery))
}

// fail records a failed authentication of the address key, and reports
// whether it was the address's last try: from now on it must wait.
func (f *failures) fail(key netip.Addr, now time.Time) (limited bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.addrs[key]
	if b == nil {
		b = f.add(key, now)
	}
	b.refill(now)
	b.tokens--
	return b.tokens < 1 && b.tokens+1 >= 1
}

// sweep drops the full buckets when the table is full, at most once per
// failEvery.
func (f *failures) sweep(now time.Time) {
	if len(f.addrs) < maxFailAddrs || now.Sub(f.swept) < failEvery {
		return
	}
	f.swept = now
	for k, b := range f.addrs {
		if b.refill(now); b.tokens >= failBurst {
			delete(f.addrs, k)
		}
	}
}

// add returns a new bucket for key, or the shared one when maxFailAddrs
// addresses are still paying for their failures.
func (f *failures) add(key netip.Addr, now time.Time) *failBucket {
	if f.addrs == nil {
		f.addrs = make(map[netip.Addr]*failBucket)
	}
	if f.sweep(now); len(f.addrs) >= maxFailAddrs {
		return &f.other
	}
	b := &failBucket{}
	f.addrs[key] = b
	return b
}
