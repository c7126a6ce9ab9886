package uplink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

// Data is what an Uplink sends.
type Data int

const (
	// Readings sends every reading (the default).
	Readings Data = iota
	// Stats sends, instead of the readings, the _stats record (count,
	// sum, min, max, mean) of each period of Options.Group of each series
	// that holds readings: once the period is closed, and again, under
	// the same id, after each reading stored later for it. The record is
	// the one /v1/devices/{device}/stats answers with for that period.
	//
	// A period is closed once the gateway's clock (Options.Now) is
	// statsGrace past its end. The outbox is read in order: readings of
	// a period still open hold back those stored after them, so a batch
	// ends before the first reading of an open period, and goes once
	// that period closed too. A reading stamped more than a period
	// ahead of the gateway's clock (a device's clock that runs ahead)
	// holds back nothing: its record goes at once, and again with each
	// batch that holds a reading of its period.
	//
	// Text readings have no such record: they are skipped, counted in
	// Status.Skipped.
	Stats
)

// ParseData parses the uplink.data config value.
func ParseData(s string) (Data, error) {
	switch s {
	case "readings", "":
		return Readings, nil
	case "stats":
		return Stats, nil
	}
	return 0, fmt.Errorf("must be readings or stats (got %q)", s)
}

func (d Data) String() string {
	if d == Stats {
		return "stats"
	}
	return "readings"
}

// ParseGroup parses the uplink.group config value: the period of
// data: stats, minute or hour.
func ParseGroup(s string) (aggregate.Level, error) {
	switch s {
	case "minute":
		return aggregate.Minute, nil
	case "hour":
		return aggregate.Hour, nil
	}
	return 0, fmt.Errorf("must be minute or hour (got %q)", s)
}

// StatsReader reads the records that Data Stats sends (buffer.Store has
// it): the very call that answers /v1/devices/{device}/stats.
type StatsReader interface {
	StatsByLevel(device, metric string, level aggregate.Level, from, to int64) ([]buffer.StatsAt, buffer.Reads, error)
}

// statsGrace is how long past its end a period waits for readings still
// on their way (a device that sends every few seconds, a Telegraf that
// flushes every 10 s) before its record goes.
const statsGrace = 10 * time.Second

// statsReadChunk is how many readings the scan of a stats batch reads
// from the outbox at once.
const statsReadChunk = 5000

// period names one record: a series and the start of one of its periods.
type period struct {
	device, metric string
	start          int64
}

// statsRecord is a record to send.
type statsRecord struct {
	device, metric, unit string
	start                int64
	stats                aggregate.Stats
}

// checkStats checks the options of Data Stats.
func checkStats(opts Options) error {
	switch opts.Data {
	case Readings:
		return nil
	case Stats:
		if opts.Group != aggregate.Minute && opts.Group != aggregate.Hour {
			return fmt.Errorf("uplink: data stats: group must be minute or hour (got %v)", opts.Group)
		}
		if opts.Stats == nil {
			return errors.New("uplink: data stats: no StatsReader")
		}
		return nil
	}
	return fmt.Errorf("uplink: unknown data %d", opts.Data)
}

// ready reports whether the period starting at start is closed at now
// (ns), or stamped so far ahead that it must not hold back others; if not,
// at is when it will be closed.
func (u *Uplink) ready(start, now int64) (ok bool, at int64) {
	dur := int64(u.opts.Group.Duration())
	at = start + dur + int64(statsGrace)
	return now >= at || start >= now+dur, at
}

// nextStatsBatch waits until a stats batch is due and returns its end: the
// batch recorded before a restart, or the readings from the cursor up to
// the first one of a period still open (or up to one record too many),
// once the first pending reading's period closed and its readings then
// waited Interval. An outbox that cannot be read ends a batch at once, so
// that sendStats says why.
func (u *Uplink) nextStatsBatch(ctx context.Context) (uint64, error) {
	var due, recheck *time.Timer
	defer func() {
		for _, t := range []*time.Timer{due, recheck} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	var dueC, recheckC <-chan time.Time
	// The period of the reading at the cursor, while it is not closed.
	var headSeq uint64
	var headStart int64
	haveHead := false
	for {
		o := u.out.Outbox()
		if o.BatchEnd > o.Cursor {
			return o.BatchEnd, nil
		}
		if recheck != nil {
			recheck.Stop()
			recheck, recheckC = nil, nil
		}
		if o.Pending() > 0 && dueC == nil {
			if !haveHead || headSeq != o.Cursor {
				head, err := u.out.ReadOutbox(o.Cursor, 1, u.readings[:0])
				u.readings = head[:0]
				if err != nil {
					return o.Cursor + 1, nil
				}
				if len(head) > 0 {
					headSeq, headStart, haveHead = o.Cursor, u.opts.Group.Truncate(head[0].TS), true
				}
			}
			if haveHead && headSeq == o.Cursor {
				if ok, at := u.ready(headStart, u.opts.Now().UnixNano()); ok {
					due = time.NewTimer(u.opts.Interval)
					dueC = due.C
				} else {
					// The clock may be stepped meanwhile: look again
					// every second at most.
					wait := min(time.Duration(at-u.opts.Now().UnixNano()), time.Second)
					recheck = time.NewTimer(max(wait, time.Millisecond))
					recheckC = recheck.C
				}
			}
		}
		retryTimer, retry := u.retryTimer() // MQTT messages set aside
		select {
		case <-retry:
			u.retryIdle(ctx)
		case <-u.out.OutboxWake():
		case <-recheckC:
		case <-dueC:
			dueC = nil
			o := u.out.Outbox()
			if o.Pending() == 0 {
				continue // dropped meanwhile (disk cap)
			}
			end, err := u.scanStats(o.Cursor, o.End, true)
			if err != nil || end > o.Cursor {
				return max(end, o.Cursor+1), nil
			}
		case <-u.reconfigure:
			return 0, errReconfigured
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if retryTimer != nil {
			retryTimer.Stop()
		}
	}
}

// scanStats reads the outbox from from up to end and collects in
// u.periods the periods its readings touch, with their series' units. It
// returns where the batch ends: end, or earlier before an entry that
// cannot be read (unless it holds from: then the error says so), before
// the reading of a period with a record too many (BatchReadings), or,
// with open, before the first reading of a period not closed yet.
func (u *Uplink) scanStats(from, end uint64, open bool) (uint64, error) {
	if u.periods == nil {
		u.periods = make(map[period]string)
	}
	clear(u.periods)
	u.statsTexts = 0
	now := u.opts.Now().UnixNano()
	seq := from
	for seq < end {
		rs, err := u.out.ReadOutbox(seq, int(min(end-seq, statsReadChunk)), u.readings[:0])
		u.readings = rs[:0]
		if err != nil {
			if _, ok := errors.AsType[*buffer.CorruptOutboxError](err); ok && seq > from {
				return seq, nil
			}
			return from, err
		}
		if len(rs) == 0 {
			return end, nil // the rest was dropped (disk cap)
		}
		for i := range rs {
			r := &rs[i]
			if r.Seq >= end {
				return end, nil
			}
			if r.IsText() { // no count, sum, min, max or mean of a state
				u.statsTexts++
				seq = r.Seq + 1
				continue
			}
			start := u.opts.Group.Truncate(r.TS)
			if open {
				if ok, _ := u.ready(start, now); !ok {
					return r.Seq, nil
				}
			}
			p := period{r.Device, r.Metric, start}
			if _, ok := u.periods[p]; !ok && len(u.periods) >= u.opts.BatchReadings {
				return r.Seq, nil
			}
			u.periods[p] = r.Unit
			seq = r.Seq + 1
		}
	}
	return end, nil
}

// sendStats sends the records of the periods that the readings from the
// cursor up to end touch, read from the store now, and then moves the
// cursor past those readings. Like send, it records the batch first, so
// that a restart sends it again under the same ids, and it parks what the
// upstream refuses as malformed.
func (u *Uplink) sendStats(ctx context.Context, end uint64) error {
	o := u.out.Outbox()
	start := o.Cursor
	scanned, err := u.scanStats(start, end, false)
	if ce, ok := errors.AsType[*buffer.CorruptOutboxError](err); ok {
		return u.skipCorrupt(ce, u.out.AdvanceOutbox)
	}
	if err != nil {
		return fmt.Errorf("uplink: read outbox: %w", err)
	}
	end = min(end, scanned)
	texts := u.statsTexts
	if len(u.periods) == 0 {
		u.countSkipped(texts)
		return u.out.AdvanceOutbox(end)
	}
	cutoff := o.BatchNote
	if o.BatchEnd != end {
		cutoff = 0
		if u.opts.MaxAge > 0 {
			cutoff = u.opts.Now().Add(-u.opts.MaxAge).UnixNano()
		}
		if err := u.out.SetOutboxBatch(end, cutoff); err != nil {
			return err
		}
	}
	recs, err := u.readRecords(cutoff)
	if err != nil {
		return err
	}
	id := strconv.FormatUint(start, 10)
	if u.opts.Gateway != "" {
		id = u.opts.Gateway + "-" + id
	}
	readings := int(end-start) - texts // texts are counted as skipped
	if IsMQTTURL(u.opts.URL) {
		err := u.publishStats(ctx, id, recs, readings, end)
		if err == nil {
			u.countSkipped(texts)
		}
		return err
	}
	for part := 0; len(recs) > 0; part++ {
		partID := id
		if part > 0 {
			partID += "-" + strconv.Itoa(part)
		}
		// A request holds at most BatchReadings records, and fewer when
		// their body would pass BatchBytes.
		n := min(len(recs), u.opts.BatchReadings)
		body, skipped := u.enc.encodeStats(partID, u.opts.Group, recs[:n])
		for len(body) > u.opts.BatchBytes && n > 1 {
			n /= 2
			body, skipped = u.enc.encodeStats(partID, u.opts.Group, recs[:n])
		}
		chunk := recs[:n]
		recs = recs[n:]
		// Readings are counted as sent with the last request of the
		// batch, which also counts them as parked if refused.
		counted := 0
		if len(recs) == 0 {
			counted = readings
		}
		if skipped > 0 {
			u.mu.Lock()
			u.st.Skipped += uint64(skipped)
			u.mu.Unlock()
		}
		if skipped == len(chunk) {
			continue
		}
		if err := u.post(ctx, partID, body, counted); err != nil {
			return err
		}
	}
	u.countSkipped(texts)
	return u.out.AdvanceOutbox(end)
}

// countSkipped counts n readings in Status.Skipped.
func (u *Uplink) countSkipped(n int) {
	if n > 0 {
		u.mu.Lock()
		u.st.Skipped += uint64(n)
		u.mu.Unlock()
	}
}

// readRecords reads the records of u.periods from the store, in order of
// device, metric and start. A record of a period that ended before cutoff
// (max_age; 0: none) is left out, its readings counted as skipped; a
// period without a record (pruned meanwhile) is left out.
func (u *Uplink) readRecords(cutoff int64) ([]statsRecord, error) {
	ps := u.periodList[:0]
	for p := range u.periods {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b period) int {
		return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(a.metric, b.metric), cmp.Compare(a.start, b.start))
	})
	u.periodList = ps
	dur := int64(u.opts.Group.Duration())
	var recs []statsRecord
	skipped := uint64(0)
	for i := 0; i < len(ps); {
		// One read for a run of periods of a series close together.
		j := i + 1
		for j < len(ps) && ps[j].device == ps[i].device && ps[j].metric == ps[i].metric && ps[j].start-ps[j-1].start <= 16*dur {
			j++
		}
		run := ps[i:j]
		got, _, err := u.opts.Stats.StatsByLevel(run[0].device, run[0].metric, u.opts.Group, run[0].start, run[len(run)-1].start+dur)
		if err != nil {
			return nil, fmt.Errorf("uplink: read records: %w", err)
		}
		k := 0
		for _, g := range got {
			for k < len(run) && run[k].start < g.Start {
				k++
			}
			if k == len(run) || run[k].start != g.Start || g.Stats.IsEmpty() {
				continue
			}
			if cutoff != 0 && g.Start+dur <= cutoff {
				skipped += g.Stats.Count
				continue
			}
			p := run[k]
			recs = append(recs, statsRecord{device: p.device, metric: p.metric, unit: u.periods[p], start: g.Start, stats: g.Stats})
		}
		i = j
	}
	if skipped > 0 {
		u.mu.Lock()
		u.st.Skipped += skipped
		u.mu.Unlock()
	}
	return recs, nil
}
