package uplink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	paho5 "github.com/eclipse/paho.golang/paho"

	"github.com/cairn-gateway/cairn/buffer"
)

// An upstream whose URL is mqtt://, mqtts://, ws:// or wss:// (MQTT over
// a WebSocket, paho's) is an MQTT broker: a batch
// goes as QoS 1 messages, one per topic (the Topic template filled in
// for each reading) and as many as MaxMessageBytes needs, over one
// connection with a persistent session and a stable client id. The
// cursor moves past the batch only when every one of its messages has
// its PUBACK; until then the messages not yet acknowledged go again,
// after a backoff, on a new connection when the old one failed. A
// restart resends the whole batch, under the same ids.
//
// MQTT 3.1.1 (the default, paho.mqtt.golang) gives a broker no way to
// refuse a message but to drop the connection or not to answer: a PUBACK
// that does not come within Timeout, or a connection lost with messages
// unacknowledged, is a refusal, counted in Status.Refused and logged with
// the topic. A broker that acknowledges a message its ACL forbids and
// drops it (Mosquitto 2.0 does so to MQTT 3.1.1 clients) cannot be told
// from one that took it; MQTT 5 (Version 5, mqtt5.go) tells.

// MQTTOptions are the options of an MQTT upstream. Zero values are
// defaults.
type MQTTOptions struct {
	// ClientID is the client id, stable across restarts so that the
	// broker keeps the session (default cairn-<Gateway>-<Name>).
	ClientID string
	// Topic is the topic of a reading's message, with {gateway},
	// {device} and {metric} filled in (default cairn/{gateway}/{device}).
	Topic string
	// Inflight is the most messages sent and not yet acknowledged
	// (default 100).
	Inflight int
	// MaxMessageBytes is the most bytes of one message's payload
	// (default 128 KiB); a device's readings of a batch are split over
	// as many messages as it takes.
	MaxMessageBytes int
	// KeepAlive is the MQTT keep-alive (default 30s).
	KeepAlive time.Duration
	// Payload is the messages' format: 0 for cairn's JSON (mqttHead),
	// or MessageSenML or MessageInflux (mqtt_payload.go).
	Payload MessageFormat
	// Version is the protocol: MQTT311 (default) or MQTT5.
	Version int
	// SAS, when set, logs in to Azure IoT Hub as a device, with a SAS
	// token renewed before it expires (mqtt_sas.go), instead of
	// Username and Password.
	SAS *SASRenewer
}

// DefaultTopic is the topic template of an MQTT upstream without one.
const DefaultTopic = "cairn/{gateway}/{device}"

// IsMQTTURL reports whether s is an MQTT broker's URL: mqtt:// or
// mqtts://, or ws:// or wss:// for MQTT over a WebSocket.
func IsMQTTURL(s string) bool {
	p, err := url.Parse(s)
	return err == nil && (p.Scheme == "mqtt" || p.Scheme == "mqtts" || p.Scheme == "ws" || p.Scheme == "wss")
}

// mqttDefaults fills in the defaults of opts.MQTT.
func mqttDefaults(opts *Options) {
	m := &opts.MQTT
	if m.ClientID == "" {
		m.ClientID = "cairn-" + opts.Gateway + "-" + opts.Name
	}
	if m.Topic == "" {
		m.Topic = DefaultTopic
	}
	if m.Inflight <= 0 {
		m.Inflight = 100
	}
	if m.MaxMessageBytes <= 0 {
		m.MaxMessageBytes = 128 << 10
	}
	if m.KeepAlive <= 0 {
		m.KeepAlive = 30 * time.Second
	}
	if m.Version == 0 {
		m.Version = MQTT311
	}
}

// mqttMessage is one message of a batch.
type mqttMessage struct {
	topic   string
	payload []byte
	seqs    []uint64 // the readings it carries (none for records)
	acked   bool     // or set aside (parkRefused)
}

// mqttLink is the connection of an MQTT upstream, used by the Run
// goroutine only: conn is nil while not connected.
type mqttLink struct {
	conn *mqttConn
	// parked are the messages set aside (mqtt_park.go), read from
	// ParkDir once loaded; waits say when each refused topic is tried
	// again.
	parked      []parkedMsg
	parkedBytes int64
	loaded      bool
	waits       map[string]topicWait
	// notBefore is when retryIdle may try again after a failure.
	notBefore time.Time
	// setAside counts the readings of the batch being delivered that
	// were set aside, not sent.
	setAside int
	// taken are the readings of the batch takenID that the broker
	// acknowledged before the batch was abandoned for new options
	// (Reconfigure): they do not go again with the rest of the batch.
	// A restart forgets them, and sends the whole batch again.
	takenID string
	taken   map[uint64]bool
}

// mqttConn is one connection to the broker: client for MQTT 3.1.1, v5
// for MQTT 5.
type mqttConn struct {
	client paho.Client
	v5     *paho5.Client
	nc     net.Conn // v5's
	// maxPacket is the largest packet an MQTT 5 broker takes (0: any).
	maxPacket int
	lost      chan struct{} // closed by paho when the connection is lost
	why       error         // why it was lost, set before lost is closed
}

// publish sends a QoS 1 message; ctx ends an MQTT 5 publish's wait.
func (c *mqttConn) publish(ctx context.Context, topic string, payload []byte) pubToken {
	if c.v5 != nil {
		return publish5(ctx, c.v5, topic, payload, c.tooLarge(topic, len(payload)))
	}
	return c.client.Publish(topic, 1, false, payload)
}

// close disconnects the link, if connected.
func (l *mqttLink) close() {
	switch {
	case l.conn == nil:
		return
	case l.conn.v5 != nil:
		// A broker that stops reading must not hold the Run goroutine.
		_ = l.conn.nc.SetWriteDeadline(time.Now().Add(time.Second))
		_ = l.conn.v5.Disconnect(&paho5.Disconnect{ReasonCode: 0})
	default:
		l.conn.client.Disconnect(250)
	}
	l.conn = nil
}

// mqttConnect connects the link if it is not connected, or was lost.
func (u *Uplink) mqttConnect(ctx context.Context) error {
	l := &u.mq
	if l.conn != nil {
		select {
		case <-l.conn.lost:
			l.close()
		default:
			if !u.tokenDue() {
				return nil
			}
			u.renewingToken()
			l.close()
		}
	}
	o := u.opts
	if o.MQTT.Version == MQTT5 {
		conn, err := u.mqttConnect5(ctx)
		if err != nil {
			return err
		}
		l.conn = conn
		return nil
	}
	co := paho.NewClientOptions().AddBroker(o.URL).
		SetClientID(o.MQTT.ClientID).
		SetProtocolVersion(4). // 3.1.1; without it paho tries 3.1 after a refusal, a second login
		SetCleanSession(false).
		SetKeepAlive(o.MQTT.KeepAlive).
		SetConnectTimeout(o.Timeout).
		SetWriteTimeout(o.Timeout).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetTLSConfig(o.TLS)
	if o.MQTT.SAS != nil {
		co.SetCredentialsProvider(o.MQTT.SAS.Credentials)
	} else if o.Username != "" {
		co.SetUsername(o.Username).SetPassword(o.Password)
	}
	conn := &mqttConn{lost: make(chan struct{})}
	var once sync.Once
	co.SetConnectionLostHandler(func(_ paho.Client, err error) {
		once.Do(func() { conn.why = err; close(conn.lost) })
	})
	conn.client = paho.NewClient(co)
	tok := conn.client.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		conn.client.Disconnect(0)
		return ctx.Err()
	}
	if err := tok.Error(); err != nil {
		conn.client.Disconnect(0)
		return fmt.Errorf("connect to %s: %w", redact(o.URL), sasRefused(o.MQTT.SAS, err))
	}
	l.conn = conn
	return nil
}

// publish sends the readings rs of the batch id as MQTT messages until
// every one has its PUBACK, or ctx ends.
func (u *Uplink) publish(ctx context.Context, id string, rs []buffer.OutboxReading) error {
	rs, taken := u.untaken(id, rs)
	msgs, skipped := u.mqttMessages(id, rs)
	if skipped > 0 {
		u.mu.Lock()
		u.st.Skipped += uint64(skipped)
		u.mu.Unlock()
	}
	err := u.deliver(ctx, id, msgs, taken+len(rs)-skipped)
	if ctx.Err() != nil {
		u.keepTaken(id, msgs)
	} else if err == nil {
		u.mq.takenID, u.mq.taken = "", nil
	}
	return err
}

// untaken returns the readings of rs, of the batch id, that the broker
// did not take before the batch was abandoned, and how many it took.
func (u *Uplink) untaken(id string, rs []buffer.OutboxReading) ([]buffer.OutboxReading, int) {
	if u.mq.takenID != id {
		u.mq.takenID, u.mq.taken = "", nil
		return rs, 0
	}
	left := make([]buffer.OutboxReading, 0, len(rs))
	for _, r := range rs {
		if !u.mq.taken[r.Seq] {
			left = append(left, r)
		}
	}
	return left, len(rs) - len(left)
}

// keepTaken records the readings of the acknowledged messages of msgs,
// of the batch id abandoned (for new options: Reconfigure).
func (u *Uplink) keepTaken(id string, msgs []mqttMessage) {
	if u.mq.takenID != id || u.mq.taken == nil {
		u.mq.takenID, u.mq.taken = id, make(map[uint64]bool)
	}
	for _, m := range msgs {
		if m.acked {
			for _, seq := range m.seqs {
				u.mq.taken[seq] = true
			}
		}
	}
}

// deliver publishes msgs, the messages of the batch id that carry n
// readings, until every one has its PUBACK, or ctx ends.
func (u *Uplink) deliver(ctx context.Context, id string, msgs []mqttMessage, n int) error {
	if err := u.retryParked(ctx); ctx.Err() != nil {
		return ctx.Err()
	} else if err != nil {
		u.log.Warn("could not try the messages set aside again; trying at the next batch", "err", err)
	}
	u.mq.setAside = 0
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			u.mu.Lock()
			u.st.Retries++
			u.mu.Unlock()
		}
		topic, err := u.publishOnce(ctx, id, msgs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := time.Now()
		if err == nil {
			u.mu.Lock()
			u.st.SentBatches++
			u.st.SentReadings += uint64(max(n-u.mq.setAside, 0))
			u.st.LastSuccess = &now
			u.st.NextAttempt = nil
			u.mu.Unlock()
			u.recovered(now)
			return nil
		}
		u.mq.close() // a refusal leaves the session in doubt: start anew
		msg := err.Error()
		if topic != "" {
			msg = "publish to " + topic + ": " + msg
		}
		u.mu.Lock()
		u.st.LastError, u.st.LastErrorAt = msg, &now
		if topic != "" {
			u.st.Refused++
		}
		u.mu.Unlock()
		if u.failedAttempts == 0 {
			u.failingSince = now
		}
		u.failedAttempts++
		u.catchUp = true
		wait := u.backoff(u.opts.RetryWaitMin, u.opts.RetryWaitMax, attempt, nil)
		u.log.Warn("broker did not take a batch; trying again", "batch", id, "topic", topic, "err", err, "in", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// mqttDrain bounds the wait for the PUBACKs of the messages in flight of
// a batch abandoned for new options.
const mqttDrain = 2 * time.Second

// errNoPuback is the reason of a message whose PUBACK did not come.
var errNoPuback = errors.New("no PUBACK")

// publishOnce connects if need be and publishes the messages of the
// batch id not yet acknowledged, at most Inflight at a time, and waits
// for their PUBACKs; a message that MQTT 5 refuses for itself is set
// aside (parkRefused). On failure it returns the topic of the message
// refused (empty when none was: the connection failed).
func (u *Uplink) publishOnce(ctx context.Context, id string, msgs []mqttMessage) (topic string, err error) {
	if err := u.mqttConnect(ctx); err != nil {
		return "", err
	}
	conn := u.mq.conn
	// The MQTT 5 publishes wait for their PUBACKs until this returns,
	// after the drain below: not only while ctx lasts.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	type sent struct {
		i   int
		tok pubToken
		at  time.Time
	}
	var window []sent
	defer func() {
		u.mu.Lock()
		reconfigured := u.next != nil
		u.mu.Unlock()
		if ctx.Err() == nil || !reconfigured {
			return
		}
		// Abandoned for new options: the messages in flight get a
		// moment for their PUBACKs, so that those the broker took are
		// known and do not go again. (At shutdown they are not waited
		// for: a restart sends the whole batch again.)
		grace := time.NewTimer(mqttDrain)
		defer grace.Stop()
		for _, s := range window {
			select {
			case <-s.tok.Done():
				msgs[s.i].acked = msgs[s.i].acked || s.tok.Error() == nil
			case <-conn.lost:
				return
			case <-grace.C:
				return
			}
		}
	}()
	wait := func(s sent) error {
		var r *Refusal
		if err := u.await(ctx, conn, s.tok, s.at); errors.As(err, &r) && r.messages() {
			if err := u.parkRefused(id, msgs[s.i], r); err != nil {
				return err
			}
			msgs[s.i].acked = true // set aside, on disk
			return nil
		} else if err != nil {
			return err
		}
		msgs[s.i].acked = true
		return nil
	}
	for i := range msgs {
		if msgs[i].acked {
			continue
		}
		if u.tokenDue() {
			// What went on the old connection is acknowledged before
			// the new one: none of it goes twice.
			for _, s := range window {
				if err := wait(s); err != nil {
					return msgs[s.i].topic, err
				}
			}
			window = window[:0]
			if err := u.mqttConnect(ctx); err != nil {
				return "", err
			}
			conn = u.mq.conn
		}
		if len(window) == u.opts.MQTT.Inflight {
			if err := wait(window[0]); err != nil {
				return msgs[window[0].i].topic, err
			}
			window = window[1:]
		}
		if u.opts.ParkDir != "" && u.mq.holding(msgs[i].topic) { // refused a moment ago: set aside unsent
			if err := u.parkRefused(id, msgs[i], nil); err != nil {
				return "", err
			}
			msgs[i].acked = true
			continue
		}
		if err := u.limit.wait(ctx, int64(len(msgs[i].payload))); err != nil {
			return "", err
		}
		tok := conn.publish(pctx, msgs[i].topic, msgs[i].payload)
		window = append(window, sent{i, tok, time.Now()})
	}
	for _, s := range window {
		if err := wait(s); err != nil {
			return msgs[s.i].topic, err
		}
	}
	return "", nil
}

// await waits for the PUBACK of tok, a message sent on conn at at, for
// up to Timeout.
func (u *Uplink) await(ctx context.Context, conn *mqttConn, tok pubToken, at time.Time) error {
	// A PUBACK that came is taken first: the message may be older than
	// Timeout by now (the byte rate held up the messages after it), and a
	// select of several ready cases picks one at random.
	select {
	case <-tok.Done():
		return conn.tokenError(tok)
	default:
	}
	t := time.NewTimer(time.Until(at.Add(u.opts.Timeout)))
	defer t.Stop()
	select {
	case <-tok.Done():
		return conn.tokenError(tok)
	case <-conn.lost:
		return lostUnacked(conn.why)
	case <-t.C:
		return fmt.Errorf("%w in %s (refused, or the broker is stuck)", errNoPuback, u.opts.Timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tokenError is the error of a finished publish. An MQTT 3.1.1 broker
// has no way to refuse a message but to drop the connection, so a 3.1.1
// token's error is always the connection's (paho's write to a socket the
// broker closed, "not Connected", "connection lost before Publish
// completed"): it is reported as such, whichever of the token and
// conn.lost paho finished first.
func (c *mqttConn) tokenError(tok pubToken) error {
	err := tok.Error()
	if err == nil || c.v5 != nil {
		return err
	}
	return lostUnacked(err)
}

// lostUnacked is the refusal of a message whose connection went before
// its PUBACK came, for the reason err.
func lostUnacked(err error) error {
	return fmt.Errorf("connection lost with the message unacknowledged: %w", err)
}

// topic fills in the topic template for r.
//
// A device or metric name may hold characters that a topic to publish to
// must not: the wildcards + and #, which would have the broker refuse the
// message and hold up the upstream for good, go as _, and so does a $ that
// would start the topic (a broker's own topics start with one).
func (u *Uplink) topic(r *buffer.OutboxReading) string {
	t := strings.NewReplacer("{gateway}", u.opts.Gateway, "{device}", topicLevel(r.Device), "{metric}", topicLevel(r.Metric)).Replace(u.opts.MQTT.Topic)
	if strings.HasPrefix(t, "$") {
		t = "_" + t[1:]
	}
	return t
}

// topicLevel makes a name fit to publish to: + and # go as _.
func topicLevel(name string) string {
	if !strings.ContainsAny(name, "+#") {
		return name
	}
	return strings.NewReplacer("+", "_", "#", "_").Replace(name)
}

// mqttMessages groups rs by topic, in the order each topic first comes,
// and writes each group as JSON messages of at most MaxMessageBytes. A
// reading whose value is not finite, or that alone is over the limit, is
// left out and counted in skipped (and logged).
func (u *Uplink) mqttMessages(id string, rs []buffer.OutboxReading) (msgs []mqttMessage, skipped int) {
	byTopic := make(map[string][]int)
	var topics []string
	for i := range rs {
		t := u.topic(&rs[i])
		if _, ok := byTopic[t]; !ok {
			topics = append(topics, t)
		}
		byTopic[t] = append(byTopic[t], i)
	}
	if u.opts.MQTT.Payload != 0 {
		return u.encodedMessages(rs, topics, byTopic)
	}
	all := make([]uint64, 0, len(rs)) // the messages' seqs, one after another
	for _, t := range topics {
		var m []byte
		first := len(all) // of the message's seqs
		n := 0
		for _, i := range byTopic[t] {
			r := &rs[i]
			one, ok := appendMQTTReading(nil, u.opts.Gateway, r)
			if !ok {
				skipped++
				continue
			}
			head := mqttHead(u.opts.Gateway, r.Device, id)
			if len(head)+len(one)+3 > u.opts.MQTT.MaxMessageBytes {
				skipped++
				u.log.Error("a reading alone is over max_message_bytes; left out", "topic", t, "device", r.Device,
					"metric", r.Metric, "bytes", len(head)+len(one)+3, "max_message_bytes", u.opts.MQTT.MaxMessageBytes)
				continue
			}
			if m != nil && len(m)+1+len(one)+3 > u.opts.MQTT.MaxMessageBytes {
				msgs = append(msgs, mqttMessage{topic: t, payload: append(m, "]}\n"...), seqs: all[first:len(all):len(all)]})
				m, n, first = nil, 0, len(all)
			}
			if m == nil {
				m = head
			}
			if n > 0 {
				m = append(m, ',')
			}
			m = append(m, one...)
			all = append(all, r.Seq)
			n++
		}
		if m != nil {
			msgs = append(msgs, mqttMessage{topic: t, payload: append(m, "]}\n"...), seqs: all[first:len(all):len(all)]})
		}
	}
	return msgs, skipped
}

// encodedMessages writes the readings of each topic with the
// MessageEncoder of Payload. A reading too large for a message on its own
// is left out, counted in skipped and logged.
func (u *Uplink) encodedMessages(rs []buffer.OutboxReading, topics []string, byTopic map[string][]int) (msgs []mqttMessage, skipped int) {
	enc := NewMessageEncoder(u.opts.MQTT.Payload, u.opts.Gateway, u.opts.Measurement)
	all := make([]uint64, 0, len(rs)) // the messages' seqs, one after another
	var group []buffer.OutboxReading
	var parts []Message
	for _, t := range topics {
		group = group[:0]
		for _, i := range byTopic[t] {
			group = append(group, rs[i])
		}
		var n int
		parts, n = enc.Split(parts[:0], group, u.opts.MQTT.MaxMessageBytes)
		skipped += n
		for _, p := range parts {
			if p.Err != nil {
				skipped++
				u.log.Error("a reading alone is over max_message_bytes; left out", "topic", t, "err", p.Err)
				continue
			}
			first := len(all)
			for i := range p.Readings {
				if enc.fits(&p.Readings[i]) {
					all = append(all, p.Readings[i].Seq)
				}
			}
			msgs = append(msgs, mqttMessage{topic: t, payload: p.Body, seqs: all[first:len(all):len(all)]})
		}
	}
	return msgs, skipped
}

// mqttHead begins a JSON message of the batch id:
//
//	{"gateway":"pi-kitchen","device":"kitchen","batch":"pi-kitchen-1200","readings":[
//	 {"id":"pi-kitchen-1200","metric":"temperature","unit":"°C","time":"RFC 3339","value":21.5},…]}
//
// where a reading's id is the gateway and the reading's sequence number
// in the log: the same whenever the reading is sent again. A text
// reading has "text":"heat" in place of "value".
func mqttHead(gateway, device, id string) []byte {
	b := append([]byte(nil), `{"gateway":`...)
	b = appendJSONString(b, gateway)
	b = append(b, `,"device":`...)
	b = appendJSONString(b, device)
	b = append(b, `,"batch":`...)
	b = appendJSONString(b, id)
	return append(b, `,"readings":[`...)
}

// appendMQTTReading appends r as an element of a message's readings; ok
// is false when its value is not finite (JSON cannot carry it).
func appendMQTTReading(b []byte, gateway string, r *buffer.OutboxReading) ([]byte, bool) {
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		return b, false
	}
	b = append(b, `{"id":`...)
	b = appendJSONString(b, MQTTReadingID(gateway, r.Seq))
	b = append(b, `,"metric":`...)
	b = appendJSONString(b, r.Metric)
	if r.Unit != "" {
		b = append(b, `,"unit":`...)
		b = appendJSONString(b, r.Unit)
	}
	b = append(b, `,"time":"`...)
	b = time.Unix(0, r.TS).UTC().AppendFormat(b, time.RFC3339Nano)
	if r.IsText() {
		b = append(b, `","text":`...)
		b = appendJSONString(b, r.Text)
	} else {
		b = append(b, `","value":`...)
		b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
	}
	return append(b, '}'), true
}

// MQTTReadingID is the idempotency id of the reading seq of gateway in an
// MQTT upstream's messages.
func MQTTReadingID(gateway string, seq uint64) string {
	return fmt.Sprintf("%s-%d", gateway, seq)
}
