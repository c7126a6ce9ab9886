package uplink

import (
	"cmp"
	"slices"

	"github.com/cairn-gateway/cairn/buffer"
)

// maxStateSeries bounds the text series whose last state sent the
// Prometheus encoder remembers (promStates.last).
const maxStateSeries = 10000

// stateSeries names a text series as remote write writes it: device,
// metric and unit.
type stateSeries struct {
	device, metric, unit string
}

// stateAt is a series' state at a time (ns).
type stateAt struct {
	text string
	ts   int64
}

// promStates turns the text readings of a batch into the samples of a
// state set (the OpenMetrics StateSet): a reading of state s of a series
// is the sample 1 of the series with the label state="s", at its time,
// and the sample 0 of the series of the state before it, at that same
// time, so that a query at any time finds one state at 1. The state
// before a reading is the one of the reading before it in the batch, in
// time order, or, for the first reading of a series in a batch, the last
// state sent of the series (last). A reading older than that last state
// sent (a late one) gets, beside its 1, the sample 0 of its own state at
// the time of the last state sent, when they differ: the series is in
// the last state then.
//
// last is bounded by maxStateSeries; when it would hold more it is
// emptied, and the next reading of each series gets no 0 for the state
// before it.
type promStates struct {
	last    map[stateSeries]stateAt
	pending map[stateSeries]stateAt // to go into last once the batch is sent
	texts   []int                   // scratch: indexes of text readings
	rs      []buffer.OutboxReading  // scratch: the samples of the batch
}

// expand returns rs with each text reading replaced by the samples of its
// state set, as readings whose Text is the state label and whose Value is
// 1 or 0, and records the last state of each series, to be remembered by
// sent. rs itself is returned when it holds no text reading.
func (p *promStates) expand(rs []buffer.OutboxReading) []buffer.OutboxReading {
	p.texts = p.texts[:0]
	for i := range rs {
		if rs[i].IsText() {
			p.texts = append(p.texts, i)
		}
	}
	if p.pending == nil {
		p.pending = make(map[stateSeries]stateAt)
	}
	clear(p.pending)
	if len(p.texts) == 0 {
		return rs
	}
	out := p.rs[:0]
	for i := range rs {
		if !rs[i].IsText() {
			out = append(out, rs[i])
		}
	}
	// In time order per series; of equal times, in the order stored.
	slices.SortStableFunc(p.texts, func(a, b int) int {
		ra, rb := &rs[a], &rs[b]
		return cmp.Or(cmp.Compare(ra.Device, rb.Device), cmp.Compare(ra.Metric, rb.Metric),
			cmp.Compare(ra.Unit, rb.Unit), cmp.Compare(ra.TS, rb.TS))
	})
	var key stateSeries
	var latest stateAt
	known := false
	for n, i := range p.texts {
		r := rs[i]
		if n == 0 || r.Device != key.device || r.Metric != key.metric || r.Unit != key.unit {
			if n > 0 {
				p.pending[key] = latest
			}
			key = stateSeries{r.Device, r.Metric, r.Unit}
			latest, known = p.last[key]
		}
		text := r.Text
		r.Value = 1
		out = append(out, r)
		switch {
		case !known || r.TS >= latest.ts:
			if known && latest.text != text {
				r.Text, r.Value = latest.text, 0
				out = append(out, r)
			}
			latest, known = stateAt{text, r.TS}, true
		case latest.text != text: // late: its state is over by the latest's time
			r.Text, r.Value, r.TS = text, 0, latest.ts
			out = append(out, r)
		}
	}
	p.pending[key] = latest
	p.rs = out
	return out
}

// sent remembers the last states of the batch that expand read last,
// once the upstream took it.
func (p *promStates) sent() {
	if len(p.pending) == 0 {
		return
	}
	if p.last == nil {
		p.last = make(map[stateSeries]stateAt)
	}
	for k, v := range p.pending {
		if _, ok := p.last[k]; !ok && len(p.last) >= maxStateSeries {
			clear(p.last)
		}
		p.last[k] = v
	}
	clear(p.pending)
}
