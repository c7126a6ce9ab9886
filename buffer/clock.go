package buffer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// What cairn does with time (docs/reliability.md says it for users).
//
// A reading's time is the device's own when its payload has one, and
// otherwise the time the gateway received it, by its wall clock.
// Retention by age goes by the wall clock too. A Raspberry Pi has no
// real-time clock: it boots with the time it last saved, or one from
// long ago, and is right once NTP has set it. A clock that is wrong
// would have retention delete readings that are not old (a clock ahead)
// or keep them for ever (a clock behind, or one reading dated 2100).
//
// So the Clock judges whether the wall clock can be trusted, and retention
// by age and the ingest's future-skew check run only while it can:
//   - the kernel says it is synchronised (adjtimex, as timedatectl shows
//     it): trusted, whatever the readings say;
//   - before the build date of the binary: not trusted;
//   - not synchronised: trusted only while the devices' own timestamps
//     agree with it, by the median of the offsets of recent messages
//     (at least clockMinSamples of them): one reading cannot lead it;
//   - the kernel cannot say (not Linux): trusted unless the devices'
//     timestamps disagree.
//
// Readings stamped with the receive time while the clock is not trusted
// cannot be stamped again later: the clock's error is not known. Their
// span of stamps is recorded (synced to disk before they are stored), and
// retention by age keeps every reading from the start of a span on until
// the clock has been trusted for as long as the policy's age: by then
// those readings are at least that old, whatever their stamps say.

// SyncState is what the kernel says of the wall clock.
type SyncState int8

const (
	SyncUnknown SyncState = iota // the kernel cannot say
	SyncNo                       // not synchronised
	SyncYes                      // synchronised (NTP)
)

func (s SyncState) String() string {
	switch s {
	case SyncNo:
		return "no"
	case SyncYes:
		return "yes"
	}
	return "unknown"
}

// ClockOptions configure a Clock.
type ClockOptions struct {
	// Now reads the wall clock (default time.Now).
	Now func() time.Time
	// Synced says whether the kernel's clock is synchronised (default
	// KernelSync).
	Synced func() SyncState
	// Floor is a time the clock is past (the build date): before it, the
	// clock is wrong.
	Floor time.Time
	// Slack is how far from the clock the median of the devices' own
	// timestamps may be for a clock that is not synchronised to be
	// trusted (default 1h).
	Slack time.Duration
	// Always trusts the clock after Floor, synchronised or not
	// (clock.trust: always: a board with a real-time clock and no NTP).
	Always bool
	Logger *slog.Logger
}

// Clock is the gateway's wall clock, and whether it can be trusted (see
// above). Its methods may be called from any goroutine.
type Clock struct {
	opts  ClockOptions
	store *Store // nil: spans are kept in memory only
	log   *slog.Logger

	trusted atomic.Bool
	lastObs atomic.Int64 // receive time of the last offset sampled
	// openFrom and openTo are the open span's (0: none), for Stamped to
	// read without the lock.
	openFrom, openTo atomic.Int64

	mu      sync.Mutex
	offsets [clockSamples]int64 // devices' timestamps minus receive times
	nOff    int                 // offsets held
	iOff    int                 // where the next goes
	status  ClockStatus         // as judged last
	spans   []ClockSpan         // as stored
}

const (
	// clockSamples is how many recent offsets the median is taken of,
	// and clockMinSamples how many it needs.
	clockSamples    = 64
	clockMinSamples = 8
	// clockSampleGap is the least time between two offsets sampled: a
	// busy gateway's median covers some seconds, not a few messages.
	clockSampleGap = 100 * time.Millisecond
	// spanAhead is how far past a stamp a span is stored: a span is
	// written once every spanAhead, not once a message.
	spanAhead = 10 * time.Minute
	// maxSpans bounds the spans kept: past it the oldest span whose
	// clock was trusted since goes.
	maxSpans = 64
	// clockCheck is how often Run judges the clock again.
	clockCheck = time.Second
)

// metaClockSpans holds the spans of untrusted stamps (JSON).
const metaClockSpans = "clock_spans"

// ClockSpan is a span of receive times given to readings while the clock
// was not trusted.
type ClockSpan struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"` // past the last stamp, by up to spanAhead
	// TrustedAt is when the clock was next trusted; zero while not yet.
	TrustedAt time.Time `json:"trusted_at,omitzero"`
}

// ClockStatus is what the Clock says of the wall clock.
type ClockStatus struct {
	Now     time.Time `json:"now"`
	Synced  string    `json:"synced"` // the kernel's word: yes, no or unknown
	Trusted bool      `json:"trusted"`
	Reason  string    `json:"reason"`
	// DeviceOffset is the median of recent devices' timestamps minus
	// their receive times, over DeviceSamples messages (none: 0).
	DeviceOffsetSeconds float64 `json:"device_offset_seconds"`
	DeviceSamples       int     `json:"device_samples"`
	// UntrustedSpans are the spans of readings stamped while the clock
	// was not trusted, which retention by age keeps (see Protected).
	UntrustedSpans []ClockSpan `json:"untrusted_spans"`
}

// NewClock returns a Clock; s, when not nil, keeps its spans of untrusted
// stamps.
func NewClock(s *Store, opts ClockOptions) (*Clock, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Synced == nil {
		opts.Synced = KernelSync
	}
	if opts.Slack <= 0 {
		opts.Slack = time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Clock{opts: opts, store: s, log: opts.Logger}
	if s != nil {
		spans, err := s.clockSpans()
		if err != nil {
			return nil, err
		}
		c.setSpans(spans)
	}
	c.Check()
	return c, nil
}

// Now reads the wall clock.
func (c *Clock) Now() time.Time { return c.opts.Now() }

// Trusted reports whether the clock was trusted when last judged.
func (c *Clock) Trusted() bool { return c.trusted.Load() }

// Observe takes a device's own timestamp ts of a message received at
// recv into the median, at most once every clockSampleGap.
func (c *Clock) Observe(ts, recv time.Time) {
	r := recv.UnixNano()
	last := c.lastObs.Load()
	if r-last < int64(clockSampleGap) && r >= last || !c.lastObs.CompareAndSwap(last, r) {
		return
	}
	c.mu.Lock()
	c.offsets[c.iOff] = ts.UnixNano() - r
	c.iOff = (c.iOff + 1) % clockSamples
	c.nOff = min(c.nOff+1, clockSamples)
	c.mu.Unlock()
}

// Stamped records that readings were stamped with recv, if the clock is
// not trusted: the open span is made to cover it, on disk, before they
// are stored. An error means it could not be recorded, and the readings
// must not be stored.
func (c *Clock) Stamped(recv time.Time) error {
	if c.trusted.Load() {
		return nil
	}
	if r := recv.UnixNano(); c.openFrom.Load() != 0 && r >= c.openFrom.Load() && r <= c.openTo.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.spans)
	if n > 0 && c.spans[n-1].TrustedAt.IsZero() {
		sp := c.spans[n-1]
		if !recv.Before(sp.From) && !recv.After(sp.To) {
			return nil
		}
		sp.From = minTime(sp.From, recv)
		sp.To = maxTime(sp.To, recv.Add(spanAhead))
		return c.putSpans(append(slices.Clone(c.spans[:n-1]), sp))
	}
	spans := append(slices.Clone(c.spans), ClockSpan{From: recv, To: recv.Add(spanAhead)})
	if len(spans) > maxSpans {
		for i, sp := range spans {
			if !sp.TrustedAt.IsZero() {
				spans = slices.Delete(spans, i, i+1)
				break
			}
		}
	}
	return c.putSpans(spans)
}

// putSpans stores spans and makes them the Clock's; c.mu is held.
func (c *Clock) putSpans(spans []ClockSpan) error {
	if c.store != nil {
		if err := c.store.putClockSpans(spans); err != nil {
			return fmt.Errorf("record readings stamped by an untrusted clock: %w", err)
		}
	}
	c.setSpans(spans)
	return nil
}

// setSpans makes spans the Clock's; c.mu is held, or c is not shared yet.
func (c *Clock) setSpans(spans []ClockSpan) {
	c.spans = spans
	c.openFrom.Store(0)
	if n := len(spans); n > 0 && spans[n-1].TrustedAt.IsZero() {
		c.openTo.Store(spans[n-1].To.UnixNano())
		c.openFrom.Store(spans[n-1].From.UnixNano())
	}
}

// Protected returns the start of the oldest span of untrusted stamps that
// a policy keeping readings for age must still keep at now: one whose
// clock is not trusted yet, or was trusted less than age ago.
func (c *Clock) Protected(now time.Time, age time.Duration) (from int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from = math.MaxInt64
	for _, sp := range c.spans {
		if sp.TrustedAt.IsZero() || now.Before(sp.TrustedAt.Add(age)) {
			from, ok = min(from, sp.From.UnixNano()), true
		}
	}
	return from, ok
}

// protectionEnds returns the earliest time at which a span that keeps
// readings for a policy of age at now stops keeping them; an open span
// has no end yet.
func (c *Clock) protectionEnds(now time.Time, age time.Duration) (end time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sp := range c.spans {
		if e := sp.TrustedAt.Add(age); !sp.TrustedAt.IsZero() && now.Before(e) && (!ok || e.Before(end)) {
			end, ok = e, true
		}
	}
	return end, ok
}

// Check judges the clock again, logs a change, closes the open span of
// untrusted stamps once the clock is trusted, and reports whether it is
// trusted and why.
func (c *Clock) Check() (bool, string) {
	// The kernel's word first: a time server steps the clock before it
	// says it is synchronised, so a clock read after "yes" is set.
	sync := c.opts.Synced()
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	med, n := c.median()
	trusted, reason := c.judge(now, sync, med, n)
	was := c.status
	c.status = ClockStatus{Synced: sync.String(), Trusted: trusted, Reason: reason, DeviceSamples: n,
		DeviceOffsetSeconds: time.Duration(med).Seconds()}
	c.trusted.Store(trusted)
	if was.Reason == "" || was.Trusted != trusted || was.Synced != c.status.Synced {
		attrs := []any{"synced", sync.String(), "now", now.UTC().Format(time.RFC3339), "reason", reason}
		switch {
		case trusted:
			c.log.Info("the clock is trusted: retention by age runs", attrs...)
		case sync == SyncNo:
			c.log.Warn("the clock is not trusted: retention by age pauses, readings without a timestamp are recorded as stamped by it; run a time server (systemd-timesyncd), or set clock.trust: always if this board keeps time without one", attrs...)
		default:
			c.log.Warn("the clock is not trusted: retention by age pauses, readings without a timestamp are recorded as stamped by it", attrs...)
		}
	}
	if k := len(c.spans) - 1; trusted && k >= 0 && c.spans[k].TrustedAt.IsZero() {
		spans := slices.Clone(c.spans)
		spans[k].TrustedAt = now
		if err := c.putSpans(spans); err != nil {
			c.log.Error("the span of readings stamped by an untrusted clock stays open", "err", err)
		} else {
			c.log.Info("readings were stamped by an untrusted clock: retention by age keeps them, and every reading from the span's start on, until the clock has been trusted for the policy's age",
				"from", spans[k].From.UTC().Format(time.RFC3339), "to", spans[k].To.UTC().Format(time.RFC3339))
		}
	}
	return trusted, reason
}

// judge is Check's decision.
func (c *Clock) judge(now time.Time, sync SyncState, med int64, n int) (bool, string) {
	if f := c.opts.Floor; !f.IsZero() && now.Before(f) {
		return false, fmt.Sprintf("the clock is before this build's date (%s)", f.UTC().Format(time.RFC3339))
	}
	if c.opts.Always {
		return true, "clock.trust is always"
	}
	off := time.Duration(med).Round(time.Second)
	agree := n >= clockMinSamples && time.Duration(max(med, -med)) <= c.opts.Slack
	disagree := n >= clockMinSamples && !agree
	switch {
	case sync == SyncYes:
		return true, "synchronised (NTP)"
	case sync == SyncNo && agree:
		return true, fmt.Sprintf("not synchronised, but the devices' own timestamps agree with it (median offset %s over %d messages)", off, n)
	case sync == SyncNo && disagree:
		return false, fmt.Sprintf("not synchronised, and the devices' own timestamps are %s from it (median over %d messages)", off, n)
	case sync == SyncNo:
		return false, fmt.Sprintf("not synchronised (NTP), and %d of the %d messages with their own timestamps needed to check it against", n, clockMinSamples)
	case disagree:
		return false, fmt.Sprintf("the devices' own timestamps are %s from it (median over %d messages)", off, n)
	}
	return true, "after this build's date (the kernel cannot say whether it is synchronised)"
}

// median returns the median of the offsets held, and their number; c.mu
// is held.
func (c *Clock) median() (int64, int) {
	if c.nOff == 0 {
		return 0, 0
	}
	o := slices.Clone(c.offsets[:c.nOff])
	slices.Sort(o)
	return o[len(o)/2], len(o)
}

// Status returns what the Clock judged last, with the wall clock now.
func (c *Clock) Status() ClockStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	st.Now = c.opts.Now().UTC()
	st.UntrustedSpans = slices.Clone(c.spans)
	if st.UntrustedSpans == nil {
		st.UntrustedSpans = []ClockSpan{}
	}
	return st
}

// Run judges the clock every second until ctx is done.
func (c *Clock) Run(ctx context.Context) error {
	t := time.NewTicker(clockCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.Check()
		}
	}
}

// clockSpans reads the spans of untrusted stamps.
func (s *Store) clockSpans() ([]ClockSpan, error) {
	var spans []ClockSpan
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(encoding.AppendMetaKey(nil, metaClockSpans))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &spans) })
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", metaClockSpans, err)
	}
	return spans, nil
}

// putClockSpans stores the spans of untrusted stamps, synced.
func (s *Store) putClockSpans(spans []ClockSpan) error {
	v, err := json.Marshal(spans)
	if err != nil {
		return err
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	err = s.db.Update(func(txn *badger.Txn) error { return txn.Set(encoding.AppendMetaKey(nil, metaClockSpans), v) })
	if err == nil && !s.noSync {
		err = s.db.Sync()
	}
	if err != nil {
		return fmt.Errorf("store %s: %w", metaClockSpans, err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
