package uplink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// After an outage, an upstream with CatchUp LiveFirst gets the newest
// readings first. Once there is more than a batch of backlog, and the
// upstream failed (or the uplink starts with that backlog), the log's
// cursor starts a live stream at the newest batch (LiveOutbox.AimLive):
// the readings before it are the backlog. While the upstream keeps
// failing, each new attempt is aimed at the newest batch again, as long as
// the upstream surely did not take the last one (it refused the
// connection or answered with an error) and has taken nothing of the live
// stream yet. Once it answers, the live stream goes on as readings come,
// a batch whenever one is due (full, or its first reading waited
// Interval), and the backlog goes, oldest first, whenever none is.

// CatchUp is what an upstream gets first after an outage.
type CatchUp int

const (
	// OldestFirst sends the backlog in the order it was stored; the
	// newest readings wait behind it.
	OldestFirst CatchUp = iota
	// LiveFirst sends the newest readings first and keeps sending new
	// ones as they come; the backlog follows whenever no live batch is
	// due.
	LiveFirst
)

// ParseCatchUp parses a catch_up setting: oldest_first or live_first.
func ParseCatchUp(s string) (CatchUp, error) {
	switch s {
	case "oldest_first", "":
		return OldestFirst, nil
	case "live_first":
		return LiveFirst, nil
	}
	return 0, fmt.Errorf("want oldest_first or live_first (got %q)", s)
}

func (c CatchUp) String() string {
	if c == LiveFirst {
		return "live_first"
	}
	return "oldest_first"
}

// LiveOutbox is an Outbox that can send its newest readings ahead of its
// backlog (buffer.Cursor is one). CatchUp LiveFirst needs it.
type LiveOutbox interface {
	Outbox
	// AimLive starts the live stream at mark, or moves it there while
	// none of it was taken.
	AimLive(mark uint64) error
	// SetLiveBatch and AdvanceLive are SetOutboxBatch and AdvanceOutbox
	// for the live stream.
	SetLiveBatch(end uint64, note int64) error
	AdvanceLive(to uint64) error
}

// BacklogTrimmer is an Outbox that can drop its oldest unsent readings
// (buffer.Cursor is one). Options.MaxBacklog needs it.
type BacklogTrimmer interface {
	TrimBacklog(lim buffer.BacklogLimit, now time.Time) (buffer.OutboxDrop, error)
}

// trimEvery is how often Run holds the backlog to Options.MaxBacklog.
const trimEvery = 5 * time.Second

// checkOutbox reports whether out can do what opts ask of it.
func checkOutbox(out Outbox, opts Options) error {
	if _, ok := out.(LiveOutbox); !ok && opts.CatchUp == LiveFirst {
		return errors.New("uplink: catch_up live_first: the outbox cannot send a live stream")
	}
	if _, ok := out.(BacklogTrimmer); !ok && opts.MaxBacklog != (buffer.BacklogLimit{}) {
		return errors.New("uplink: max_backlog: the outbox cannot drop its backlog")
	}
	if opts.MaxBacklog.MaxAge < 0 || opts.MaxBacklog.MaxBytes < 0 {
		return errors.New("uplink: max_backlog must not be negative")
	}
	return nil
}

// batch is a batch to send: the backlog's from the cursor, or the live
// stream's from its place, up to end.
type batch struct {
	live bool
	end  uint64
}

// stream is where a batch starts, what was recorded of it, and how it is
// recorded and passed.
type stream struct {
	start, batchEnd uint64
	batchNote       int64
	set             func(end uint64, note int64) error
	advance         func(to uint64) error
}

// stream returns the backlog's stream, or the live stream's.
func (u *Uplink) stream(o buffer.OutboxState, live bool) stream {
	if !live {
		return stream{o.Cursor, o.BatchEnd, o.BatchNote, u.out.SetOutboxBatch, u.out.AdvanceOutbox}
	}
	lo := u.out.(LiveOutbox)
	return stream{o.Live, o.LiveBatchEnd, o.LiveBatchNote, lo.SetLiveBatch, lo.AdvanceLive}
}

// catchUpBatch returns the next batch while the cursor has a live stream,
// starting or aiming it first as CatchUp asks; ok is false when the cursor
// has none, and the backlog goes as usual.
func (u *Uplink) catchUpBatch() (b batch, ok bool, err error) {
	lo, can := u.out.(LiveOutbox)
	if !can {
		return batch{}, false, nil
	}
	if err := u.aim(lo); err != nil {
		return batch{}, false, err
	}
	o := u.out.Outbox()
	switch {
	case o.CatchingUp():
		u.catchingUp = true
	case u.catchingUp:
		u.catchingUp = false
		u.log.Info("the backlog caught up with the live stream; readings go in order again", "pending", o.Pending())
	}
	if !o.CatchingUp() {
		return batch{}, false, nil
	}
	k := uint64(u.opts.BatchReadings)
	switch {
	case o.LiveBatchEnd > o.Live:
		return batch{live: true, end: o.LiveBatchEnd}, true, nil
	case u.liveDue(o):
		u.liveSince = time.Time{}
		return batch{live: true, end: o.Live + min(o.End-o.Live, k)}, true, nil
	case o.BatchEnd > o.Cursor:
		return batch{end: o.BatchEnd}, true, nil
	}
	return batch{end: min(o.Mark, o.Cursor+k)}, true, nil
}

// aim starts the live stream at the newest batch, or aims it there again,
// when CatchUp is LiveFirst, more than a batch is pending, and the
// upstream is failing, or came back, or the uplink just started.
func (u *Uplink) aim(lo LiveOutbox) error {
	if u.opts.CatchUp != LiveFirst {
		return nil
	}
	o := lo.Outbox()
	k := uint64(u.opts.BatchReadings)
	switch {
	case !o.CatchingUp() && u.catchUp:
		if u.failedAttempts == 0 {
			u.catchUp = false // started, or came back: now or not at all
		}
		if o.Pending() <= k {
			return nil
		}
	case o.CatchingUp() && o.Live == o.Mark && u.failedAttempts > 0 && u.notTaken:
		if o.End < o.Live+k+1 {
			return nil // nothing newer than what is being tried
		}
	default:
		return nil
	}
	mark := o.End - min(o.End, k)
	if o.BatchEnd > o.Cursor {
		mark = max(mark, o.BatchEnd)
	}
	if mark <= o.Cursor || mark >= o.End {
		return nil
	}
	if err := lo.AimLive(mark); err != nil {
		return err
	}
	if o.CatchingUp() {
		u.log.Debug("live stream aimed again at the newest readings", "live_from", mark, "backlog", mark-o.Cursor)
	} else {
		u.log.Info("upstream gets the newest readings first; the backlog follows", "live_from", mark, "backlog", mark-o.Cursor)
	}
	return nil
}

// liveDue reports whether a live batch is due: a full one, or one whose
// first reading was seen Interval ago, or any while the upstream fails.
func (u *Uplink) liveDue(o buffer.OutboxState) bool {
	if o.End <= o.Live {
		u.liveSince = time.Time{}
		return false
	}
	if o.End-o.Live >= uint64(u.opts.BatchReadings) || u.failedAttempts > 0 {
		return true
	}
	if u.liveSince.IsZero() {
		u.liveSince = time.Now()
	}
	return time.Since(u.liveSince) >= u.opts.Interval
}

// errReplan ends the attempts at a batch so that the next one is chosen
// again: with LiveFirst, newer readings have come while the upstream
// failed.
var errReplan = errors.New("newer readings go first")

// prepareRetry is called before each attempt after the first at a batch:
// it gives up the batch for a newer one when aim would choose another.
func (u *Uplink) prepareRetry(*http.Request) error {
	if u.opts.CatchUp != LiveFirst || !u.notTaken {
		return nil
	}
	if _, ok := u.out.(LiveOutbox); !ok {
		return nil
	}
	o := u.out.Outbox()
	k := uint64(u.opts.BatchReadings)
	switch b := u.inFlight; {
	case !b.live && !o.CatchingUp() && o.Pending() > k,
		!b.live && o.CatchingUp() && o.End > o.Live,
		b.live && o.CatchingUp() && o.Live == o.Mark && o.End > o.Live+k:
		return errReplan
	}
	return nil
}

// surelyNotTaken reports whether a failed attempt cannot have delivered the
// batch: the connection was refused, or the upstream answered.
func surelyNotTaken(resp *http.Response, err error) bool {
	if resp != nil {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// TrimBacklog drops what of the backlog is beyond Options.MaxBacklog, once;
// Run does it every few seconds.
func (u *Uplink) TrimBacklog(now time.Time) error {
	tr, ok := u.out.(BacklogTrimmer)
	u.mu.Lock()
	lim := u.maxBacklog
	u.mu.Unlock()
	if lim.MaxAge > 0 && u.trusted != nil && !u.trusted() {
		lim.MaxAge = 0 // readings are not judged old by a clock that is not trusted
	}
	if !ok || lim == (buffer.BacklogLimit{}) {
		return nil
	}
	d, err := tr.TrimBacklog(lim, now)
	if d.Readings() > 0 {
		// The backlog's batch being tried starts at the cursor: it was
		// dropped too, and is not sent.
		u.mu.Lock()
		if u.cancelBatch != nil && !u.sendingLive {
			u.cancelBatch()
		}
		u.mu.Unlock()
	}
	return err
}

// trimLoop runs TrimBacklog every trimEvery until ctx ends.
func (u *Uplink) trimLoop(ctx context.Context) {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	for {
		if err := u.TrimBacklog(u.now()); err != nil {
			u.log.Error("uplink cannot hold the backlog to max_backlog", "err", err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
