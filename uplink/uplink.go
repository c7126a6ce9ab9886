// Package uplink sends the readings of the store's outbox upstream over
// HTTP: in batches, in the order they were stored, each batch under a
// stable id, retrying without limit until the upstream takes it, and
// moving the outbox's cursor only then.
package uplink

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/klauspost/compress/gzip"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/syncfile"
)

// Outbox is what the uplink needs of the store (buffer.Store has it).
type Outbox interface {
	Outbox() buffer.OutboxState
	OutboxWake() <-chan struct{}
	ReadOutbox(from uint64, max int, dst []buffer.OutboxReading) ([]buffer.OutboxReading, error)
	SetOutboxBatch(end uint64, note int64) error
	AdvanceOutbox(to uint64) error
}

// Options configure an Uplink. Zero values are defaults.
type Options struct {
	// Name names the upstream in Status (its cursor's name in the store).
	Name string
	// URL is the upstream's full write URL, such as
	// http://127.0.0.1:8428/write (VictoriaMetrics) or
	// http://127.0.0.1:8086/write?db=sensors (InfluxDB 1.x), or with
	// Prometheus http://127.0.0.1:9090/api/v1/write; InfluxDB 2.x's
	// /api/v2/write URL is InfluxV2URL's.
	URL    string
	Format Format
	// Measurement is the line protocol measurement (default "readings").
	Measurement string
	// Gateway names this gateway upstream: a tag of every line, the
	// gateway of a JSON batch, and the first part of every batch id.
	Gateway string
	// Data is what goes: the readings (default) or the _stats records of
	// each Group (stats.go).
	Data  Data
	Group aggregate.Level
	// Stats reads the records of Data Stats; Now is the gateway's clock
	// (default time.Now), which says when a period is closed. Reconfigure
	// keeps both.
	Stats StatsReader
	Now   func() time.Time
	// Trusted reports whether the gateway's clock is trusted (nil: it
	// is): MaxBacklog by age drops nothing while it is not. Reconfigure
	// keeps it.
	Trusted func() bool

	// BatchReadings is the most readings in one batch (default 5,000).
	BatchReadings int
	// BatchBytes is the most bytes of one batch's body before compression
	// (default 1 MiB); a batch stops at the reading that crosses it.
	BatchBytes int
	// Interval is the longest a stored reading waits for its batch to
	// fill before the batch goes anyway (default 1s).
	Interval time.Duration
	// MaxAge skips readings older than this when their batch is sent
	// (0: none is too old); they are counted in Status.Skipped.
	MaxAge time.Duration
	// CatchUp is what goes first after an outage (catchup.go): the
	// backlog (OldestFirst, the default) or the newest readings
	// (LiveFirst, which needs a LiveOutbox).
	CatchUp CatchUp
	// MaxBacklog, when set, is the backlog the upstream may hold: its
	// oldest unsent readings beyond it are dropped, counted in
	// Status.DroppedUnsent and logged (needs a BacklogTrimmer). Zero: none are;
	// the store's disk cap governs.
	MaxBacklog buffer.BacklogLimit

	// Timeout bounds one request, response included (default 30s).
	Timeout time.Duration
	// RetryWaitMin and RetryWaitMax bound the backoff between attempts
	// (defaults 1s and 5m): it doubles from the least, with jitter.
	RetryWaitMin, RetryWaitMax time.Duration
	// RetryAfterMax caps the wait an upstream asks for with Retry-After
	// on 429 and 503 (default 10m).
	RetryAfterMax time.Duration
	// Gzip compresses request bodies (Content-Encoding: gzip), except
	// with Prometheus, whose bodies are snappy-compressed always.
	Gzip bool
	// TLS configures https URLs (nil: the system's roots).
	TLS *tls.Config
	// Authorization is the whole Authorization header value, such as
	// "Bearer …" or "Token …" (empty: none).
	Authorization string
	// Username and Password, when Username is set, are sent as basic
	// auth.
	Username, Password string
	// MaxBytesPerSecond caps the bytes of request bodies, as posted
	// (after compression), that go upstream a second, every attempt
	// counted: a request waits until its body may go (0: no limit).
	MaxBytesPerSecond int64

	// MQTT are the options of an MQTT broker's URL (IsMQTTURL; mqtt.go).
	MQTT MQTTOptions

	// ParkDir is where batches the upstream refuses as malformed are kept,
	// with its response, for a person to look at.
	ParkDir string
	Logger  *slog.Logger
}

// formatName names what the upstream is sent: the format of its bodies,
// or an MQTT upstream's payload.
func (o *Options) formatName() string {
	if IsMQTTURL(o.URL) && o.MQTT.Payload != 0 {
		return o.MQTT.Payload.String()
	}
	return o.Format.String()
}

// Status says how the uplink is doing. LastError stays after a later
// success: the upstream is failing only while LastErrorAt is after
// LastSuccess.
type Status struct {
	Name            string     `json:"name"`
	URL             string     `json:"url"`
	Format          string     `json:"format"`
	PendingReadings uint64     `json:"pending_readings"`
	OldestPending   *time.Time `json:"oldest_pending"` // timestamp of the first unsent reading
	SentReadings    uint64     `json:"sent_readings"`
	SentBatches     uint64     `json:"sent_batches"`
	Retries         uint64     `json:"retries"`
	ParkedBatches   uint64     `json:"parked_batches"` // on disk in ParkDir, this run's and earlier ones
	ParkedReadings  uint64     `json:"parked_readings"`
	Skipped         uint64     `json:"skipped_readings"` // older than max_age, not finite, or a text with data: stats
	// DroppedUnsent counts the readings dropped before they were sent,
	// by the disk cap or MaxBacklog, for the life of the data directory.
	DroppedUnsent uint64     `json:"dropped_unsent"`
	LastSuccess   *time.Time `json:"last_success"`
	LastError     string     `json:"last_error"`
	LastErrorAt   *time.Time `json:"last_error_at"`
	NextAttempt   *time.Time `json:"next_attempt"` // set while waiting to try a batch again
	// Refused counts the MQTT messages that the broker did not
	// acknowledge, an attempt each (mqtt.go).
	Refused uint64 `json:"refused_messages"`
	// SetAsideDropped counts the MQTT messages set aside after a refusal
	// that were deleted, the oldest, for their bound (mqtt_park.go).
	SetAsideDropped uint64 `json:"set_aside_dropped"`
}

// Failing reports whether the upstream is failing: its last error came
// after its last success, or it never had one.
func (s *Status) Failing() bool {
	return s.LastError != "" && s.LastErrorAt != nil && (s.LastSuccess == nil || s.LastErrorAt.After(*s.LastSuccess))
}

// Uplink sends the outbox upstream. Create it with New and Run it.
type Uplink struct {
	out    Outbox
	opts   Options
	client *retryablehttp.Client
	enc    *encoder
	limit  *byteLimiter // nil: no limit
	log    *slog.Logger
	// parkDir is Options.ParkDir, which Reconfigure keeps, as it keeps
	// stats and now.
	parkDir string
	stats   StatsReader
	now     func() time.Time
	trusted func() bool

	mu          sync.Mutex // guards st, next, cancelBatch, maxBacklog and sendingLive
	st          Status
	next        *Options           // options to use from the next batch on
	cancelBatch context.CancelFunc // abandons the batch being tried
	reconfigure chan struct{}      // wakes Run for new options
	// maxBacklog is Options.MaxBacklog in effect: the trim loop reads it.
	// sendingLive says that the batch being tried is the live stream's.
	maxBacklog  buffer.BacklogLimit
	sendingLive bool

	// Used by the Run goroutine only.
	mq       mqttLink // an MQTT upstream's connection
	readings []buffer.OutboxReading
	kept     []buffer.OutboxReading
	zbuf     bytes.Buffer
	// periods and periodList are the periods of a stats batch (stats.go).
	periods    map[period]string
	periodList []period
	statsTexts int // text readings the last scanStats passed over
	// failingSince is when the upstream first failed to take a batch
	// since it last took one, failedAttempts how often it failed since:
	// the log says so once it takes one again.
	failingSince   time.Time
	failedAttempts int
	// catchUp is set at start and when a batch fails: the next batch
	// may start a live stream (catchup.go). notTaken says that the last
	// failed attempt surely did not deliver its batch; inFlight is the
	// batch being sent, liveSince when live readings were first seen
	// waiting; catchingUp whether the cursor had a live stream at the
	// last batch.
	catchUp    bool
	notTaken   bool
	inFlight   batch
	liveSince  time.Time
	catchingUp bool
}

// New checks opts and creates the Uplink of out.
func New(out Outbox, opts Options) (*Uplink, error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	if err := checkOutbox(out, opts); err != nil {
		return nil, err
	}
	u := &Uplink{out: out, log: opts.Logger, parkDir: opts.ParkDir, reconfigure: make(chan struct{}, 1)}
	u.stats, u.now, u.trusted = opts.Stats, opts.Now, opts.Trusted
	u.use(opts)
	if opts.ParkDir != "" {
		n, err := countParked(opts.ParkDir)
		if err != nil {
			return nil, fmt.Errorf("uplink: %w", err)
		}
		u.st.ParkedBatches = n
	}
	return u, nil
}

// withDefaults checks opts and fills in the defaults.
func withDefaults(opts Options) (Options, error) {
	if opts.URL == "" {
		return opts, errors.New("uplink: no URL")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if opts.Measurement == "" {
		opts.Measurement = "readings"
	}
	if opts.Format == Influx {
		for _, n := range []struct{ what, name string }{{"measurement", opts.Measurement}, {"gateway", opts.Gateway}} {
			if !WritableName(n.name) {
				return opts, fmt.Errorf("uplink: %s %q: line protocol cannot carry it (a line break, or a backslash at its end or before a comma, an equals sign, a space or a backslash)", n.what, n.name)
			}
		}
	}
	if opts.MaxBytesPerSecond < 0 {
		return opts, fmt.Errorf("uplink: max bytes per second %d: must be 0 (no limit) or more", opts.MaxBytesPerSecond)
	}
	if opts.BatchReadings <= 0 {
		opts.BatchReadings = 5000
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 1 << 20
	}
	def(&opts.Interval, time.Second)
	def(&opts.Timeout, 30*time.Second)
	def(&opts.RetryWaitMin, time.Second)
	def(&opts.RetryWaitMax, 5*time.Minute)
	def(&opts.RetryAfterMax, 10*time.Minute)
	if IsMQTTURL(opts.URL) {
		mqttDefaults(&opts)
	}
	opts.RetryWaitMax = max(opts.RetryWaitMax, opts.RetryWaitMin)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts, checkStats(opts)
}

// use makes opts the options in effect, with a client and an encoder for
// them. Called by New, and by the Run goroutine between batches.
func (u *Uplink) use(opts Options) {
	if u.client != nil {
		u.client.HTTPClient.CloseIdleConnections()
	}
	u.mq.close()
	u.opts = opts
	u.enc = newEncoder(opts.Format, opts.Measurement, opts.Gateway)
	if opts.MaxBytesPerSecond != u.limit.rate() {
		u.limit = newByteLimiter(opts.MaxBytesPerSecond)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = opts.TLS
	transport.MaxIdleConnsPerHost = 2
	u.client = &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: transport,
			Timeout:   opts.Timeout,
			// A redirect is not followed: Go would turn the POST of a
			// 301, 302 or 303 into a GET without the batch, and a 2xx
			// to that would pass for the batch taken. checkRetry
			// tries again and says where the URL points now.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		RetryWaitMin: opts.RetryWaitMin,
		RetryWaitMax: opts.RetryWaitMax,
		// No limit: a batch is tried until the upstream takes it, or
		// refuses it as malformed, or the gateway stops (or the
		// configuration changes: Reconfigure).
		RetryMax:   int(^uint(0) >> 1),
		CheckRetry: u.checkRetry,
		Backoff: func(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
			if opts.CatchUp == LiveFirst {
				// A batch may be given up for a newer one: the
				// backoff goes on from the failures since the last
				// success.
				n = max(n, u.failedAttempts-1)
			}
			return u.backoff(lo, hi, n, resp)
		},
		PrepareRetry:   u.prepareRetry,
		RequestLogHook: u.attempt,
	}
	u.mu.Lock()
	u.st.Name, u.st.URL, u.st.Format = opts.Name, redact(opts.URL), opts.formatName()
	u.maxBacklog = opts.MaxBacklog
	u.mu.Unlock()
}

// Reconfigure has the running Uplink use opts from its next batch on. A
// batch being tried is abandoned at once and sent again, the same batch
// under the same id, with opts: after a wrong URL or token is fixed, the
// backlog goes without waiting out a backoff. ParkDir and Logger stay.
func (u *Uplink) Reconfigure(opts Options) error {
	opts.Stats, opts.Now, opts.Trusted = u.stats, u.now, u.trusted
	opts, err := withDefaults(opts)
	if err != nil {
		return err
	}
	if err := checkOutbox(u.out, opts); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	opts.ParkDir, opts.Logger = u.parkDir, u.log
	u.next = &opts
	if u.cancelBatch != nil {
		u.cancelBatch()
	}
	select {
	case u.reconfigure <- struct{}{}:
	default:
	}
	return nil
}

// countParked counts the batches parked in dir by earlier runs.
func countParked(dir string) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".response") || strings.HasSuffix(e.Name(), ".error") {
			n++
		}
	}
	return n, nil
}

// Status returns how the uplink is doing.
func (u *Uplink) Status() Status {
	u.mu.Lock()
	st := u.st
	u.mu.Unlock()
	o := u.out.Outbox()
	st.PendingReadings, st.DroppedUnsent = o.Pending(), o.Dropped
	if o.Pending() > 0 {
		if rs, err := u.out.ReadOutbox(o.Cursor, 1, nil); err == nil && len(rs) == 1 {
			t := rs[0].Time()
			st.OldestPending = &t
		}
	}
	return st
}

// Run sends batches until ctx ends, and returns nil then. A failure of
// the store (a busy or full disk) is logged and tried again after a
// backoff: it must not stop the gateway, which keeps storing readings.
func (u *Uplink) Run(ctx context.Context) error {
	if u.opts.Data == Stats {
		u.log.Info("uplink sends stats", "group", u.opts.Group.String())
	}
	u.log.Info("uplink started", "url", redact(u.opts.URL), "format", u.opts.formatName(),
		"pending", u.out.Outbox().Pending(), "max_bytes_per_second", u.opts.MaxBytesPerSecond)
	defer u.client.HTTPClient.CloseIdleConnections()
	defer u.mq.close()
	trimCtx, stopTrim := context.WithCancel(ctx)
	trimmed := make(chan struct{})
	go func() { defer close(trimmed); u.trimLoop(trimCtx) }()
	defer func() { stopTrim(); <-trimmed }()
	u.catchUp = true
	failures := 0
	for {
		u.mu.Lock()
		next := u.next
		u.next = nil
		u.mu.Unlock()
		if next != nil {
			u.use(*next)
			failures = 0
			u.log.Info("uplink reconfigured", "url", redact(next.URL), "format", next.formatName())
		}
		due, send := u.nextBatch, u.send
		if u.opts.Data == Stats { // records of closed periods, in order: no live stream
			due = func(ctx context.Context) (batch, error) {
				end, err := u.nextStatsBatch(ctx)
				return batch{end: end}, err
			}
			send = func(ctx context.Context, b batch) error { return u.sendStats(ctx, b.end) }
		}
		b, err := due(ctx)
		if errors.Is(err, errReconfigured) {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil { // the store failed to record where the batch goes
			if !u.storeFailed(ctx, err, &failures) {
				return nil
			}
			continue
		}
		batchCtx, cancel := context.WithCancel(ctx)
		u.mu.Lock()
		if u.next != nil { // reconfigured meanwhile
			cancel()
		}
		u.cancelBatch = cancel
		u.mu.Unlock()
		err = send(batchCtx, b)
		u.mu.Lock()
		u.cancelBatch = nil
		u.mu.Unlock()
		reconfigured := batchCtx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil || reconfigured || errors.Is(err, errReplan) {
			failures = 0
			continue
		}
		if !u.storeFailed(ctx, err, &failures) {
			return nil
		}
	}
}

// storeFailed says that the store failed the uplink (a full or failing
// disk), and waits a backoff before the next try: it must not stop the
// gateway, which keeps storing readings, nor loop at full speed. It
// reports false if ctx ended meanwhile.
func (u *Uplink) storeFailed(ctx context.Context, err error, failures *int) bool {
	now := time.Now()
	wait := u.backoff(u.opts.RetryWaitMin, u.opts.RetryWaitMax, *failures, nil)
	*failures++
	u.mu.Lock()
	u.st.LastError, u.st.LastErrorAt = err.Error(), &now
	u.mu.Unlock()
	u.log.Error("uplink cannot use the store; trying again", "err", err, "in", wait.Round(time.Millisecond))
	select {
	case <-time.After(wait):
		return true
	case <-ctx.Done():
		return false
	}
}

// nextBatch waits until a batch is due and returns it: the batch
// recorded before a restart, or a full batch, or whatever is pending once
// the first pending reading has waited Interval; while the cursor has a
// live stream, catchUpBatch's.
func (u *Uplink) nextBatch(ctx context.Context) (batch, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var due <-chan time.Time
	for {
		if b, ok, err := u.catchUpBatch(); ok || err != nil {
			return b, err
		}
		o := u.out.Outbox()
		if o.BatchEnd > o.Cursor {
			return batch{end: o.BatchEnd}, nil
		}
		if o.Pending() >= uint64(u.opts.BatchReadings) {
			return batch{end: o.Cursor + uint64(u.opts.BatchReadings)}, nil
		}
		if o.Pending() > 0 && due == nil {
			timer = time.NewTimer(u.opts.Interval)
			due = timer.C
		}
		retryTimer, retry := u.retryTimer() // MQTT messages set aside
		select {
		case <-retry:
			u.retryIdle(ctx)
		case <-u.out.OutboxWake():
		case <-due:
			o := u.out.Outbox()
			if o.CatchingUp() {
				continue // a live stream, started meanwhile by a drop? catchUpBatch chooses
			}
			if o.Pending() > 0 {
				return batch{end: o.Cursor + min(o.Pending(), uint64(u.opts.BatchReadings))}, nil
			}
			due = nil // dropped meanwhile (disk cap): wait for more
		case <-u.reconfigure:
			return batch{}, errReconfigured
		case <-ctx.Done():
			return batch{}, ctx.Err()
		}
		if retryTimer != nil {
			retryTimer.Stop()
		}
	}
}

// errReconfigured has Run apply new options before the next batch.
var errReconfigured = errors.New("reconfigured")

// send sends the readings of b, from the cursor (or the live stream's
// place) up to b.end (or fewer, if they cross BatchBytes) until the
// upstream takes them or refuses them as malformed, and then moves the
// cursor past them. A batch recorded before (o.BatchEnd, o.LiveBatchEnd)
// goes again exactly as it was formed: the same readings, with the same
// max_age cutoff, under the same id.
func (u *Uplink) send(ctx context.Context, b batch) error {
	o := u.out.Outbox()
	if b.live && !o.CatchingUp() {
		return nil // merged with the backlog meanwhile: choose again
	}
	str := u.stream(o, b.live)
	start, end := str.start, b.end
	var err error
	u.readings, err = u.out.ReadOutbox(start, int(end-start), u.readings[:0])
	if ce, ok := errors.AsType[*buffer.CorruptOutboxError](err); ok {
		return u.skipCorrupt(ce, str.advance)
	}
	if err != nil {
		return fmt.Errorf("uplink: read outbox: %w", err)
	}
	if len(u.readings) == 0 {
		// Dropped meanwhile (retention's disk cap, which counts them):
		// nothing to send.
		return str.advance(end)
	}
	if last := u.readings[len(u.readings)-1].Seq + 1; last < end {
		// Stopped before an entry that cannot be read: this batch ends
		// there, the next one parks that entry.
		end = last
	}
	cutoff := str.batchNote
	if str.batchEnd != end {
		end = u.cut(u.readings, end)
		cutoff = 0
		if u.opts.MaxAge > 0 {
			cutoff = time.Now().Add(-u.opts.MaxAge).UnixNano()
		}
		if err := str.set(end, cutoff); errors.Is(err, buffer.ErrNoLiveStream) {
			return nil // merged with the backlog meanwhile: choose again
		} else if err != nil {
			return err
		}
	}
	u.inFlight = batch{live: b.live, end: end}
	u.mu.Lock()
	u.sendingLive = b.live
	u.mu.Unlock()
	rs := u.readings
	for len(rs) > 0 && rs[len(rs)-1].Seq >= end {
		rs = rs[:len(rs)-1]
	}
	id := strconv.FormatUint(start, 10)
	if u.opts.Gateway != "" {
		id = u.opts.Gateway + "-" + id
	}
	fresh := u.fresh(rs, cutoff)
	skipped := len(rs) - len(fresh)
	if len(fresh) > 0 && IsMQTTURL(u.opts.URL) {
		if err := u.publish(ctx, id, fresh); err != nil {
			return err
		}
	} else if len(fresh) > 0 {
		body, bad := u.enc.encode(id, fresh)
		skipped += bad
		if len(fresh) > bad {
			if err := u.post(ctx, id, body, len(fresh)-bad); err != nil {
				return err
			}
			u.enc.sent()
		}
	}
	if skipped > 0 {
		u.mu.Lock()
		u.st.Skipped += uint64(skipped)
		u.mu.Unlock()
	}
	return str.advance(end)
}

// fresh returns the readings of rs not older than cutoff (0: all), in a
// slice of its own.
func (u *Uplink) fresh(rs []buffer.OutboxReading, cutoff int64) []buffer.OutboxReading {
	if cutoff == 0 {
		return rs
	}
	kept := u.kept[:0]
	for _, r := range rs {
		if r.TS >= cutoff {
			kept = append(kept, r)
		}
	}
	u.kept = kept
	return kept
}

// cut returns where a batch of rs must end to stay under BatchBytes: end,
// or the sequence number of the reading that would cross the limit.
func (u *Uplink) cut(rs []buffer.OutboxReading, end uint64) uint64 {
	size := 0
	for i := range rs {
		// A reading costs about its names and unit, a timestamp and a
		// value, plus the tags (line protocol) or its id and the keys
		// (JSON).
		size += len(rs[i].Device) + len(rs[i].Metric) + len(rs[i].Unit) + len(rs[i].Text) + len(u.opts.Gateway) + len(u.opts.Measurement) + 64
		if u.opts.Format == JSON {
			size += len(rs[i].Device) + 100
		}
		if size > u.opts.BatchBytes && i > 0 {
			return rs[i].Seq
		}
	}
	return end
}

// gzipWriters keeps gzip writers between bodies. A writer holds about
// 1 MiB (its history and hash tables): one kept with each upstream for as
// long as cairn runs would be a seventh of the heap a steady gateway
// keeps live, held while its upstream is down too. From the pool, a
// writer is reused while batches follow each other and let go by the
// collections after the last.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzipLevel) // the level is valid
	return w
}}

// gzipLevel: klauspost/compress's level 6 is about as fast as
// compress/gzip's BestSpeed, and its bodies are a sixth smaller for a
// live stream's second-long batches of line protocol (8.2 against 9.8
// bytes a reading) and two fifths smaller for a backlog's batches of
// 5,000 (4.7 against 7.9): docs/uplink.md, Bytes upstream.
const gzipLevel = 6

// gzipBody appends body, gzipped, to dst.
func gzipBody(dst *bytes.Buffer, body []byte) error {
	w := gzipWriters.Get().(*gzip.Writer)
	defer func() {
		w.Reset(nil) // the pool does not keep dst
		gzipWriters.Put(w)
	}()
	w.Reset(dst)
	if _, err := w.Write(body); err != nil {
		return err
	}
	return w.Close()
}

// post sends one batch until it is taken or parked.
func (u *Uplink) post(ctx context.Context, id string, body []byte, n int) error {
	payload := body
	gz := u.opts.Gzip && u.opts.Format != Prometheus // remote write is snappy already
	if gz {
		u.zbuf.Reset()
		if err := gzipBody(&u.zbuf, body); err != nil {
			return err
		}
		payload = u.zbuf.Bytes()
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, u.opts.URL, payload)
	if err != nil {
		return fmt.Errorf("uplink: %w", err)
	}
	req.Header.Set("Content-Type", u.opts.Format.contentType())
	req.Header.Set("Idempotency-Key", id)
	req.Header.Set("User-Agent", "cairn")
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if u.opts.Format == Prometheus {
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	}
	if u.opts.Authorization != "" {
		req.Header.Set("Authorization", u.opts.Authorization)
	}
	if u.opts.Username != "" {
		req.SetBasicAuth(u.opts.Username, u.opts.Password)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return err // only the context ends the retries
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	now := time.Now()
	if resp.StatusCode < 300 {
		u.mu.Lock()
		u.st.SentBatches++
		u.st.SentReadings += uint64(n)
		u.st.LastSuccess = &now
		u.st.NextAttempt = nil
		u.mu.Unlock()
		u.recovered(now)
		return nil
	}
	// checkRetry let through only what is not worth trying again: the
	// upstream finds the batch malformed. Park it and go on.
	if err := u.park(id, body, resp, reply); err != nil {
		return fmt.Errorf("uplink: park batch %s: %w", id, err)
	}
	msg := fmt.Sprintf("batch %s refused with %s: %s", id, resp.Status, snippet(reply))
	u.log.Error("upstream refused a batch as malformed; parked it and going on", "batch", id,
		"status", resp.StatusCode, "readings", n, "dir", u.opts.ParkDir, "response", snippet(reply))
	u.mu.Lock()
	u.st.ParkedBatches++
	u.st.ParkedReadings += uint64(n)
	u.st.LastError, u.st.LastErrorAt, u.st.NextAttempt = msg, &now, nil
	u.mu.Unlock()
	return nil
}

// skipCorrupt parks an outbox entry that cannot be read, with the reason,
// counts its readings as parked, and moves the cursor past it: one bad
// entry must not stop everything behind it. Its readings are still in the
// store.
func (u *Uplink) skipCorrupt(ce *buffer.CorruptOutboxError, advance func(uint64) error) error {
	id := "outbox-" + strconv.FormatUint(ce.Entry, 10)
	if u.opts.Gateway != "" {
		id = u.opts.Gateway + "-" + id
	}
	if u.opts.ParkDir != "" {
		name := filepath.Join(u.opts.ParkDir, safeName(id))
		if err := os.MkdirAll(u.opts.ParkDir, 0o750); err != nil {
			return fmt.Errorf("uplink: park outbox entry %d: %w", ce.Entry, err)
		}
		if err := syncfile.Write(name+".entry", ce.Value, 0o640); err != nil {
			return fmt.Errorf("uplink: park outbox entry %d: %w", ce.Entry, err)
		}
		if err := syncfile.Write(name+".error", []byte(ce.Error()+"\n"), 0o640); err != nil {
			return fmt.Errorf("uplink: park outbox entry %d: %w", ce.Entry, err)
		}
		if err := syncDir(u.opts.ParkDir); err != nil {
			return fmt.Errorf("uplink: park outbox entry %d: %w", ce.Entry, err)
		}
	}
	if err := advance(ce.To); err != nil {
		return err
	}
	n := ce.To - ce.From
	now := time.Now()
	u.log.Error("an outbox entry cannot be read; parked it and going on (its readings stay in the store)",
		"entry", ce.Entry, "readings", n, "first_seq", ce.From, "dir", u.opts.ParkDir, "err", ce.Err)
	u.mu.Lock()
	u.st.ParkedBatches++
	u.st.ParkedReadings += n
	u.st.LastError, u.st.LastErrorAt = ce.Error(), &now
	u.mu.Unlock()
	return nil
}

// park writes a refused batch and the upstream's answer to ParkDir.
func (u *Uplink) park(id string, body []byte, resp *http.Response, reply []byte) error {
	if u.opts.ParkDir == "" {
		return nil
	}
	if err := os.MkdirAll(u.opts.ParkDir, 0o750); err != nil {
		return err
	}
	name := filepath.Join(u.opts.ParkDir, safeName(id))
	if err := syncfile.Write(name+u.opts.Format.fileExt(), body, 0o640); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s\nat %s\n%s %s\n", redact(u.opts.URL), time.Now().UTC().Format(time.RFC3339), resp.Proto, resp.Status)
	for _, k := range []string{"Content-Type", "Date"} {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.Write(reply)
	if err := syncfile.Write(name+".response", b.Bytes(), 0o640); err != nil {
		return err
	}
	// The batch leaves the outbox next: its file must outlast a power cut.
	return syncDir(u.opts.ParkDir)
}

// syncDir syncs a directory, so that the files just created in it last.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// safeName makes a batch id fit for a file name.
func safeName(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, id)
}

// attempt runs before every attempt of a batch: it counts those after
// the batch's first (with LiveFirst, every attempt while the upstream
// fails: a batch may be given up for a newer one), and waits until the
// body may go under MaxBytesPerSecond. The wait is outside the request's
// Timeout, which starts only after it.
func (u *Uplink) attempt(_ retryablehttp.Logger, req *http.Request, n int) {
	if n > 0 || (u.opts.CatchUp == LiveFirst && u.failedAttempts > 0) {
		u.mu.Lock()
		u.st.Retries++
		u.mu.Unlock()
	}
	if err := u.limit.wait(req.Context(), req.ContentLength); err != nil {
		return // the batch is abandoned: the request fails at once with its context
	}
}

// checkRetry decides whether a batch goes again: after a network error,
// a 5xx, 408 or 429, and also after a redirect, 401, 403 and 404, which say
// that the URL or the credentials are wrong, not the batch (the batch waits for the
// fix, and last_error says what to fix). Any other 4xx means the upstream
// finds the batch itself malformed: it is parked.
func (u *Uplink) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	var msg string
	switch {
	case err != nil:
		msg = err.Error()
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		msg = fmt.Sprintf("%s: redirected to %q; set uplink.url to where it points", resp.Status, resp.Header.Get("Location"))
	case resp.StatusCode >= 500, resp.StatusCode == 408, resp.StatusCode == 429,
		resp.StatusCode == 401, resp.StatusCode == 403, resp.StatusCode == 404:
		reply, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		msg = fmt.Sprintf("%s: %s", resp.Status, snippet(reply))
	default:
		return false, nil
	}
	now := time.Now()
	u.mu.Lock()
	u.st.LastError, u.st.LastErrorAt = msg, &now
	u.mu.Unlock()
	if u.failedAttempts == 0 {
		u.failingSince = now
	}
	u.failedAttempts++
	u.catchUp, u.notTaken = true, surelyNotTaken(resp, err)
	// The batch goes again as its body: the uplink's array of the
	// readings it was made from is let go, so that an upstream down for
	// hours does not keep them live (5,000 at the defaults, half a MB);
	// the next batch reads its own into a new array.
	u.readings, u.kept = nil, nil
	u.log.Warn("upstream did not take a batch; trying again", "err", msg)
	return true, nil
}

// recovered logs, once the upstream took a batch at now after failing,
// how long it failed and how many attempts it refused or missed.
func (u *Uplink) recovered(now time.Time) {
	if u.failedAttempts == 0 {
		return
	}
	u.log.Info("upstream takes batches again", "failing_for", now.Sub(u.failingSince).Round(time.Millisecond),
		"failed_attempts", u.failedAttempts, "url", redact(u.opts.URL))
	u.failedAttempts, u.failingSince = 0, time.Time{}
}

// backoff is the wait before attempt n+1: what the upstream asked for with
// Retry-After on 429 or 503, up to RetryAfterMax; else RetryWaitMin
// doubled n times, up to RetryWaitMax, less up to half of it at random so
// that a fleet of gateways does not come back all at once.
func (u *Uplink) backoff(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
	wait, ok := retryAfter(resp)
	if ok {
		// Not sooner than the least backoff: "Retry-After: 0" must not
		// make a busy loop.
		wait = max(min(wait, u.opts.RetryAfterMax), lo)
	} else {
		wait = expBackoff(lo, hi, n)
	}
	next := time.Now().Add(wait)
	u.mu.Lock()
	u.st.NextAttempt = &next
	u.mu.Unlock()
	return wait
}

// expBackoff is lo doubled n times, up to hi, less up to half of it at
// random, so that a fleet of gateways does not come back all at once.
func expBackoff(lo, hi time.Duration, n int) time.Duration {
	wait := hi
	if n < 40 && lo<<uint(n) < hi && lo<<uint(n) > 0 {
		wait = lo << uint(n)
	}
	return wait - time.Duration(rand.Int64N(int64(wait)/2+1))
}

// retryAfter parses the Retry-After of a 429 or 503: seconds or a date.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0, false
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, 1<<31)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// snippet is the first line of an upstream's answer, short.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// redact hides a password in a URL.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.IndexByte(rest, '@'); at >= 0 && !strings.Contains(rest[:at], "/") {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
		}
	}
	return s
}
