// Package gateway takes sensor readings in over MQTT, from the embedded
// broker or from an external one, decodes and validates them, hands them to
// the store's group commit, and serves the local HTTP status and query API.
//
// Both ingest paths feed one Ingester, and both acknowledge a QoS 1 message
// to its sender only once the Ingester has reported it settled: stored and
// synced, or rejected for good as bad input.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/payload"
)

// committer is the part of buffer.Writer the Ingester uses.
type committer interface {
	SubmitFrom(ctx context.Context, from string, readings []buffer.Reading, done func(buffer.Result)) error
	Forget(from string)
}

// Clock is the gateway's wall clock and whether it is trusted
// (buffer.Clock).
type Clock interface {
	Now() time.Time
	// Trusted reports whether the clock is trusted.
	Trusted() bool
	// Observe takes a device's own timestamp of a message received at
	// recv, to judge the clock by.
	Observe(ts, recv time.Time)
	// Stamped records that readings were stamped with recv; an error
	// means they must not be stored.
	Stamped(recv time.Time) error
}

// wallClock is the Clock of an Ingester given none: the system's, trusted
// once past saneClock.
type wallClock struct{}

func (wallClock) Now() time.Time               { return time.Now() }
func (wallClock) Trusted() bool                { return time.Now().UnixNano() > saneClock }
func (wallClock) Observe(time.Time, time.Time) {}
func (wallClock) Stamped(time.Time) error      { return nil }

// Ingester decodes MQTT messages into readings and submits them to the
// store's writer. It is safe for concurrent use.
type Ingester struct {
	routes atomic.Pointer[[]Route] // replaced whole by SetRoutes
	w      committer
	log    *slog.Logger
	skew   time.Duration
	clock  Clock
	// decoders holds *decodeState values, each for one goroutine at a time.
	decoders sync.Pool

	messages, readings, stored, duplicates, ignored, failed atomic.Uint64
	refused                                                 atomic.Uint64
	wrongKind, tooManyStates                                atomic.Uint64 // readings refused by kind, and for a new text over the limit

	// restamped counts readings given the receive time for a device time
	// before 2000.
	restamped atomic.Uint64

	unmatched unmatchedTopics
	units     unitBook // units that messages give for other messages' readings

	// skipped counts messages that are not readings, by kind (Route.Skip).
	skipped sync.Map // kind → *atomic.Uint64

	mu       sync.Mutex // guards rejected and examples
	rejected map[string]uint64
	examples []Rejection // newest last, at most maxExamples
}

// maxExamples is how many recent rejections the status keeps.
const maxExamples = 10

// Rejection describes one message that was rejected.
type Rejection struct {
	Time    time.Time `json:"time"`
	Topic   string    `json:"topic"`
	Reason  string    `json:"reason"`
	Detail  string    `json:"detail"`
	Payload string    `json:"payload"` // the first bytes, as text
}

// IngesterOptions configure an Ingester.
type IngesterOptions struct {
	// Routes map topics to formats; the first whose pattern matches a
	// topic applies.
	Routes []Route
	// MaxPayload caps a message's size in bytes (0: no cap).
	MaxPayload int
	// MaxFutureSkew is how far past the receive time a reading's timestamp
	// may be (0: no limit). It is not applied while the clock is not
	// trusted: a board without a real-time clock boots in the past until
	// NTP sets it.
	MaxFutureSkew time.Duration
	// Clock gives receive times and says whether they can be trusted
	// (default: the system's clock, trusted after 2026-01-01).
	Clock  Clock
	Logger *slog.Logger
}

// saneClock (2026-01-01) is a time the clock of a running gateway is past;
// before it, the clock is taken to be unset.
const saneClock = 1767225600 * int64(time.Second)

// NewIngester creates an Ingester that submits readings to w.
func NewIngester(w committer, opts IngesterOptions) *Ingester {
	in := &Ingester{
		w:        w,
		log:      opts.Logger,
		skew:     opts.MaxFutureSkew,
		clock:    opts.Clock,
		rejected: make(map[string]uint64),
	}
	if in.clock == nil {
		in.clock = wallClock{}
	}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	in.unmatched.log = in.log
	in.decoders.New = func() any {
		return &decodeState{dec: payload.Decoder{MaxPayload: opts.MaxPayload, Units: &in.units}}
	}
	in.SetRoutes(opts.Routes)
	return in
}

// Now reads the Ingester's clock: the receive time of a message.
func (in *Ingester) Now() time.Time { return in.clock.Now() }

// SetRoutes replaces the routes: messages that Ingest receives from now on
// are matched against routes. A message being ingested keeps the route it
// matched.
func (in *Ingester) SetRoutes(routes []Route) {
	routes = slices.Clone(routes)
	in.routes.Store(&routes)
}

// Ingest decodes one message received at recv and submits its readings.
// It reports whether the topic matches a route; if it does not, Ingest
// counts the message as unmatched (unmatched.go), does nothing else and
// never calls done.
//
// Otherwise done is called exactly once, possibly before Ingest returns:
// with nil when the message is settled — its readings are on disk, or it was
// rejected as bad input (counted, with its reason) and must be acknowledged
// so that the sender moves on — or with an error when the readings could not
// be stored, in which case the message must not be acknowledged.
func (in *Ingester) Ingest(ctx context.Context, topic string, payload []byte, recv time.Time, done func(error)) bool {
	return in.ingest(ctx, *in.routes.Load(), "", topic, payload, recv, done)
}

// ingest is Ingest by routes instead of the Ingester's own (the embedded
// broker's, by which the message was judged), for a message that MQTT
// client from published. The group commit waits for the messages of
// other publishers, never for from while it waits for its
// acknowledgements (buffer.WriterOptions.Wait). Ingest, for the messages
// of an external broker, whose publishers cairn does not see, gives no
// client: each device counts as a publisher of its own.
func (in *Ingester) ingest(ctx context.Context, routes []Route, from, topic string, body []byte, recv time.Time, done func(error)) bool {
	i, device, metric := matchRoute(routes, topic)
	if i < 0 {
		in.unmatched.add(topic, recv)
		return false
	}
	route := &routes[i]
	in.messages.Add(1)
	st := in.decoders.Get().(*decodeState)
	dec := &st.dec
	decoded, ignored, err := dec.DecodeRoute(st.scratch[:0], &route.Route, body, device, metric, recv)
	readings := st.keep(decoded)
	clear(decoded) // the readings kept are copies; the scratch lets go of them
	st.scratch = decoded[:0]
	restamped := dec.Restamped()
	dropped := slices.Clone(dec.Dropped()) // nil unless a field was left out
	rel := relTimes{}
	rel.lo, rel.hi, rel.ok = dec.Relative()
	in.decoders.Put(st)
	if ignored > 0 {
		in.ignored.Add(uint64(ignored))
	}
	if err == nil {
		err = in.checkTimes(readings, recv)
	}
	if err == nil && restamped > 0 {
		in.restamped.Add(uint64(restamped))
	}
	if kind := payload.SkipKind(err); kind != "" {
		in.skip(kind)
		readings, err = nil, nil
	}
	if err != nil {
		in.reject(topic, body, recv, err)
		readings = nil // settle it in order with the sender's other messages
	} else {
		in.dropFields(topic, body, recv, dropped)
	}
	if err := in.noteTimes(readings, recv, rel); err != nil {
		in.failed.Add(1)
		done(err)
		return true
	}
	in.readings.Add(uint64(len(readings)))
	err = in.w.SubmitFrom(ctx, from, readings, func(res buffer.Result) {
		if res.Err != nil {
			in.failed.Add(1)
			done(res.Err)
			return
		}
		in.stored.Add(uint64(res.Stored))
		in.duplicates.Add(uint64(res.Duplicates))
		if res.Refused > 0 {
			// Settled like bad input: the readings refused will not be
			// taken on a redelivery either.
			in.refused.Add(uint64(res.Refused))
			in.reject(topic, body, recv, &payload.RejectError{Reason: ReasonTooManySeries, Detail: refusedDetail(res)})
		}
		if res.WrongKind+res.TooManyStates > 0 {
			in.refusedTexts(topic, body, recv, res)
		}
		done(nil)
	})
	if err != nil {
		in.failed.Add(1)
		done(fmt.Errorf("submit: %w", err))
	}
	return true
}

// decodeState is a Decoder with the slices its messages' readings are
// decoded into (scratch, reused) and then kept in until their commit
// (slab): one allocation for the readings of many messages, where
// decoding into a new slice for each message took two (it grew), a sixth
// of the bytes allocated at a steady 10,000 messages a second.
type decodeState struct {
	dec     payload.Decoder
	scratch []buffer.Reading
	slab    []buffer.Reading // its unused capacity is for the next messages
}

// readingSlab is how many readings a slab holds: about 6 KiB.
const readingSlab = 64

// keep returns a copy of rs carved from the slab, nil for none. The
// copy's capacity is its length: appending to it cannot reach the next
// message's readings.
func (st *decodeState) keep(rs []buffer.Reading) []buffer.Reading {
	if len(rs) == 0 {
		return nil
	}
	if cap(st.slab)-len(st.slab) < len(rs) {
		st.slab = make([]buffer.Reading, 0, max(readingSlab, len(rs)))
	}
	n := len(st.slab)
	st.slab = append(st.slab, rs...)
	return st.slab[n:len(st.slab):len(st.slab)]
}

// Gone tells the group commit that MQTT client from has disconnected: no
// commit waits for it any more.
func (in *Ingester) Gone(from string) { in.w.Forget(from) }

// Settle calls done, in order with the readings submitted before, once
// they are settled: for a message on no configured topic that must not be
// acknowledged ahead of the messages before it. done is called with nil,
// or with an error when the store is stopping.
func (in *Ingester) Settle(ctx context.Context, done func(error)) {
	err := in.w.SubmitFrom(ctx, "", nil, func(res buffer.Result) { done(res.Err) })
	if err != nil {
		done(fmt.Errorf("submit: %w", err))
	}
}

// skip counts a message that is not a reading, by kind.
func (in *Ingester) skip(kind string) {
	n, ok := in.skipped.Load(kind)
	if !ok {
		n, _ = in.skipped.LoadOrStore(kind, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// ReasonTooManySeries counts a message some of whose readings the store
// refused because each would have made a new series over a limit
// (store.max_series_per_device or store.max_series); its other readings
// are stored.
const ReasonTooManySeries = "too_many_series"

// ReasonWrongKind counts a message some of whose readings the store
// refused for being of the other kind than their series: a number into a
// text series, or a text into a number series (a series takes the kind
// of its first reading). Its other readings are stored.
const ReasonWrongKind = "wrong_kind"

// ReasonTooManyStates counts a message some of whose readings the store
// refused because each would have brought a new text to a series that
// holds store.max_states_per_series of them already. Its other readings
// are stored.
const ReasonTooManyStates = "too_many_states"

// refusedTexts counts the readings res refused by kind and for too many
// states, under their reasons, settled like bad input: the readings
// refused will not be taken on a redelivery either.
func (in *Ingester) refusedTexts(topic string, body []byte, recv time.Time, res buffer.Result) {
	if res.WrongKind > 0 {
		in.wrongKind.Add(uint64(res.WrongKind))
		in.reject(topic, body, recv, &payload.RejectError{Reason: ReasonWrongKind, Detail: moreDetail(res.KindRefusal, res.WrongKind)})
	}
	if res.TooManyStates > 0 {
		in.tooManyStates.Add(uint64(res.TooManyStates))
		in.reject(topic, body, recv, &payload.RejectError{Reason: ReasonTooManyStates, Detail: moreDetail(res.StatesRefusal, res.TooManyStates)})
	}
}

// moreDetail describes n readings refused, first the first of them.
func moreDetail(first error, n int) string {
	if n == 1 {
		return first.Error()
	}
	return fmt.Sprintf("%s, and %d more readings of the message", first.Error(), n-1)
}

// refusedDetail describes the readings res refused.
func refusedDetail(res buffer.Result) string {
	if res.Refused == 1 {
		return res.Refusal.Error()
	}
	return fmt.Sprintf("%s, and %d more readings of the message", res.Refusal.Error(), res.Refused-1)
}

// ReasonTimeRange rejects a message with a reading from before 2000, or
// further into the future than IngesterOptions.MaxFutureSkew.
const ReasonTimeRange = "time_out_of_range"

// checkTimes rejects readings whose time is absurd.
func (in *Ingester) checkTimes(readings []buffer.Reading, recv time.Time) error {
	limit := int64(math.MaxInt64)
	if in.skew > 0 && in.clock.Trusted() {
		limit = recv.Add(in.skew).UnixNano()
	}
	for _, r := range readings {
		switch {
		case r.TS < payload.MinReadingTime:
			return &payload.RejectError{Reason: ReasonTimeRange, Detail: fmt.Sprintf("%s %s is before 2000", r.Metric, r.Time().Format(time.RFC3339Nano))}
		case r.TS > limit:
			return &payload.RejectError{Reason: ReasonTimeRange, Detail: fmt.Sprintf("%s %s is more than %s ahead of the gateway's clock", r.Metric, r.Time().Format(time.RFC3339Nano), in.skew)}
		}
	}
	return nil
}

// relTimes is the range of a message's times that the decoder made
// relative to the receive time (Decoder.Relative).
type relTimes struct {
	lo, hi int64
	ok     bool
}

// noteTimes tells the clock what a message's times say of it: the newest
// of the device's own timestamps, and the times that came from the clock
// itself: readings stamped with the receive time (the decoder gives those
// recv itself, to the nanosecond: no device's timestamp is that), and
// times relative to it (rel).
func (in *Ingester) noteTimes(readings []buffer.Reading, recv time.Time, rel relTimes) error {
	r, own, stamped := recv.UnixNano(), int64(math.MinInt64), false
	for i := range readings {
		switch ts := readings[i].TS; {
		case ts == r:
			stamped = true
		case rel.ok && ts >= rel.lo && ts <= rel.hi:
		default:
			own = max(own, ts)
		}
	}
	if own != math.MinInt64 {
		in.clock.Observe(time.Unix(0, own), recv)
	}
	if stamped {
		if err := in.clock.Stamped(recv); err != nil {
			return err
		}
	}
	if rel.ok {
		for _, ts := range []int64{rel.lo, rel.hi} {
			if err := in.clock.Stamped(time.Unix(0, ts)); err != nil {
				return err
			}
		}
	}
	return nil
}

// reject counts a rejected message and keeps it as an example.
func (in *Ingester) reject(topic string, body []byte, now time.Time, err error) {
	reason := payload.RejectReason(err)
	ex := Rejection{Time: now.UTC(), Topic: topic, Reason: reason, Detail: err.Error(), Payload: excerpt(body, 64)}
	in.mu.Lock()
	in.rejected[reason]++
	if len(in.examples) == maxExamples {
		copy(in.examples, in.examples[1:])
		in.examples = in.examples[:maxExamples-1]
	}
	in.examples = append(in.examples, ex)
	in.mu.Unlock()
	in.log.Debug("message rejected", "topic", topic, "reason", reason, "err", err)
}

// dropFields counts each field the decoder left out of a message whose
// other readings are stored (payload.Decoder.Dropped) under its reason,
// and keeps the first of each reason as an example.
func (in *Ingester) dropFields(topic string, body []byte, recv time.Time, dropped []payload.RejectError) {
	for i := range dropped {
		if slices.ContainsFunc(dropped[:i], func(e payload.RejectError) bool { return e.Reason == dropped[i].Reason }) {
			in.mu.Lock()
			in.rejected[dropped[i].Reason]++
			in.mu.Unlock()
			continue
		}
		in.reject(topic, body, recv, &dropped[i])
	}
}

// excerpt returns at most n bytes of b as valid UTF-8 text.
func excerpt(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	s := string(b)
	if !utf8.ValidString(s) {
		s = fmt.Sprintf("%q", b)
	}
	return s
}

// IngestStats are the Ingester's counters since start.
type IngestStats struct {
	Messages   uint64 `json:"messages"`   // messages on a configured topic
	Readings   uint64 `json:"readings"`   // readings decoded from them
	Stored     uint64 `json:"stored"`     // readings new to the store
	Duplicates uint64 `json:"duplicates"` // readings already stored (redelivery)
	Ignored    uint64 `json:"ignored_fields"`
	Failed     uint64 `json:"failed"` // messages whose readings could not be stored
	// Refused counts the readings not stored for making a new series
	// over a limit; the messages they came in count under the reason
	// too_many_series.
	Refused uint64 `json:"refused_readings"`
	// WrongKind counts the readings not stored for being of the other
	// kind than their series (reason wrong_kind), TooManyStates those
	// whose text would have been one more than their series may hold
	// (store.max_states_per_series; reason too_many_states).
	WrongKind     uint64            `json:"wrong_kind_readings"`
	TooManyStates uint64            `json:"too_many_states_readings"`
	Rejected      uint64            `json:"rejected"`
	ByReason      map[string]uint64 `json:"rejected_by_reason"`
	Examples      []Rejection       `json:"recent_rejections"`
	// Paused is true while the store takes no new readings (the disk
	// cap, or too little free space), PausedReason says why; the API
	// fills them in from the Writer.
	Paused       bool   `json:"paused"`
	PausedReason string `json:"paused_reason"`

	// Restamped counts readings given the receive time because their
	// device's time was before 2000: its clock was never set.
	Restamped uint64 `json:"restamped"`

	// Unmatched counts the messages on topics that no pattern of
	// mqtt.topics matches (not stored); RecentUnmatched are the last few
	// such topics, newest first.
	Unmatched       uint64      `json:"unmatched"`
	RecentUnmatched []Unmatched `json:"recent_unmatched"`

	// Skipped counts the messages, on a configured topic, that are not
	// readings but a device's or bridge's other traffic (availability,
	// command, bridge, discovery, meta): acknowledged, not stored.
	Skipped map[string]uint64 `json:"skipped"`
}

// Stats returns a snapshot of the counters, newest rejection first.
func (in *Ingester) Stats() IngestStats {
	st := IngestStats{
		Messages:   in.messages.Load(),
		Readings:   in.readings.Load(),
		Stored:     in.stored.Load(),
		Duplicates: in.duplicates.Load(),
		Ignored:    in.ignored.Load(),
		Failed:     in.failed.Load(),
		Refused:    in.refused.Load(),
		ByReason:   make(map[string]uint64),
	}
	st.WrongKind, st.TooManyStates = in.wrongKind.Load(), in.tooManyStates.Load()
	st.Restamped = in.restamped.Load()
	st.Unmatched, st.RecentUnmatched = in.unmatched.stats()
	st.Skipped = make(map[string]uint64)
	in.skipped.Range(func(k, v any) bool {
		st.Skipped[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	in.mu.Lock()
	for r, n := range in.rejected {
		st.ByReason[r] = n
		st.Rejected += n
	}
	st.Examples = make([]Rejection, 0, len(in.examples))
	for i := len(in.examples) - 1; i >= 0; i-- {
		st.Examples = append(st.Examples, in.examples[i])
	}
	in.mu.Unlock()
	return st
}

// Reasons returns the rejection reasons seen so far, sorted.
func (st IngestStats) Reasons() []string {
	out := make([]string, 0, len(st.ByReason))
	for r := range st.ByReason {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
