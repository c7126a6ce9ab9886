package uplink

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// byteLimiter holds the bodies an uplink posts to a number of bytes a
// second: a token bucket of one second's worth, which a request's body
// must take out before the request goes. A body bigger than the bucket
// takes it out in pieces, waiting for each: it goes late, never not at
// all. A nil *byteLimiter lets everything through.
//
// Used by the Run goroutine only (the client calls wait before each
// attempt).
type byteLimiter struct {
	lim *rate.Limiter
	bps int64
}

// newByteLimiter returns a limiter of bps bytes a second, or nil for
// bps 0 (no limit).
func newByteLimiter(bps int64) *byteLimiter {
	if bps <= 0 {
		return nil
	}
	// One second's worth, at most 1 GiB so that it fits an int on any
	// platform.
	burst := int(min(bps, 1<<30))
	return &byteLimiter{lim: rate.NewLimiter(rate.Limit(bps), burst), bps: bps}
}

// rate is the limit in bytes a second (0: none).
func (l *byteLimiter) rate() int64 {
	if l == nil {
		return 0
	}
	return l.bps
}

// wait blocks until n bytes may go, or ctx ends, and returns ctx's error
// then. Unlike rate.Limiter.WaitN it takes n beyond the burst, and it
// waits out a wait longer than ctx's deadline up to the deadline rather
// than returning at once.
func (l *byteLimiter) wait(ctx context.Context, n int64) error {
	if l == nil {
		return nil
	}
	for n > 0 {
		k := int(min(n, int64(l.lim.Burst())))
		r := l.lim.ReserveN(time.Now(), k) // k ≤ burst: always OK
		if d := r.Delay(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				r.Cancel()
				return ctx.Err()
			}
		}
		n -= int64(k)
	}
	return nil
}
