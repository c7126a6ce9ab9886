package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/packets"
)

// BrokerOptions configure the embedded broker.
type BrokerOptions struct {
	Listen string // TCP address, e.g. "127.0.0.1:1883"; port 0 picks one; "" for none
	// TLSListen is the address of the TLS listener ("" for none), served
	// with TLS. When TLS.ClientCAs is set, clients must present a
	// certificate it signed, and its common name is their user name.
	TLSListen string
	TLS       *tls.Config
	Ingester  *Ingester
	Logger    *slog.Logger
	// Security is who may connect, publish and subscribe, and the limits
	// of each client. The zero value lets only anonymous clients on
	// loopback listeners in.
	Security BrokerSecurity
	// Refusals counts what the broker refuses; NewBroker makes one if nil.
	Refusals *Refusals
	// ReadCoalesce is how long a busy client's messages may gather before
	// they are read (see gatherConn); 0 reads each as it comes.
	ReadCoalesce time.Duration
	// Version is cairn's version, which $SYS/broker/version gives as
	// "cairn VERSION".
	Version string
}

// BrokerSecurity configures authentication, ACLs and limits.
type BrokerSecurity struct {
	Passwords *Passwords // nil: no password file
	ACL       *ACL       // rules beyond the default ones; may be nil
	// Routes are the ingest routes: by default a client may read and write
	// the topics of the patterns with {device} only where the device is
	// its user name.
	Routes []Route
	// AllowAnonymous lets clients without a user name in, with full access,
	// on every listener; nil lets them in on loopback listeners only.
	AllowAnonymous *bool
	MaxPacketSize  uint32  // bytes of a packet, its header included; 0: no limit
	MaxClients     int     // connections at once, per listener and in all; 0: no limit
	MaxInflight    uint16  // QoS 1 messages of a client awaiting their PUBACK; 0: 65535
	WriteBuffer    int     // packets queued to a client at most; 0: 1024
	MessageRate    float64 // messages per second of a client; 0: no limit (anonymous clients are not limited)
}

// Broker is the embedded MQTT broker. Messages on the Ingester's topics are
// ingested inside the broker: a QoS 1 PUBACK is sent only once the message
// is settled (stored and synced, or rejected as bad input), and only then is
// the message routed on to subscribers. The sender's later messages keep
// flowing into the same group commit meanwhile, and each client's PUBACKs
// go out in the order of its PUBLISHes.
type Broker struct {
	srv      *mqtt.Server
	guard    *guardHook
	hook     *ingestHook
	addr     string
	tlsAddr  string
	refusals *Refusals
}

// NewBroker creates the broker and binds its listeners, so that Addr is
// known before Run. Don't forget to Run it.
func NewBroker(opts BrokerOptions) (*Broker, error) {
	sec := opts.Security
	caps := capabilities(sec)
	maxConns := int64(math.MaxInt64)
	if sec.MaxClients > 0 {
		maxConns = int64(sec.MaxClients)
	}
	srv := mqtt.New(&mqtt.Options{
		Capabilities:           caps,
		InlineClient:           true,
		Logger:                 opts.Logger,
		SysTopicResendInterval: 60,
	})
	srv.Info.Version = "cairn " + opts.Version
	refusals := opts.Refusals
	if refusals == nil {
		refusals = NewRefusals(opts.Logger)
	}
	guard := &guardHook{
		passwords: sec.Passwords,
		anonymous: make(map[string]bool),
		certUser:  make(map[string]bool),
		rate:      sec.MessageRate,
		refusals:  refusals,
	}
	guard.policy.Store(newPolicy(sec.Routes, sec.ACL))
	// The guard goes first: a hook that rejects a packet stops the hooks
	// after it, and nothing refused may reach the ingest hook.
	if err := srv.AddHook(guard, nil); err != nil {
		return nil, fmt.Errorf("broker guard hook: %w", err)
	}
	hook := &ingestHook{
		srv:    srv,
		guard:  guard,
		in:     opts.Ingester,
		log:    opts.Logger,
		queues: make(map[*mqtt.Client]*ackQueue),
	}
	if err := srv.AddHook(hook, nil); err != nil {
		return nil, fmt.Errorf("broker ingest hook: %w", err)
	}
	b := &Broker{srv: srv, guard: guard, hook: hook, refusals: refusals}
	add := func(id, addr, key string, tc *tls.Config) (string, error) {
		guard.anonymous[id] = IsLoopback(addr)
		if sec.AllowAnonymous != nil {
			guard.anonymous[id] = *sec.AllowAnonymous
		}
		guard.certUser[id] = tc != nil && tc.ClientCAs != nil
		l := &listener{id: id, address: addr, tls: tc, maxConns: maxConns, gather: opts.ReadCoalesce, refusals: refusals, log: opts.Logger, srv: srv}
		if err := srv.AddListener(l); err != nil {
			return "", fmt.Errorf("%s %s: %w", key, addr, err)
		}
		return l.Address(), nil
	}
	var err error
	if opts.Listen != "" {
		if b.addr, err = add("tcp", opts.Listen, "mqtt.embedded.listen", nil); err != nil {
			return nil, err
		}
	}
	if opts.TLSListen != "" {
		if opts.TLS == nil {
			return nil, errors.New("mqtt.embedded.tls_listen: no TLS configuration")
		}
		if b.tlsAddr, err = add("tls", opts.TLSListen, "mqtt.embedded.tls_listen", opts.TLS); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// capabilities are mochi's limits for sec.
func capabilities(sec BrokerSecurity) *mqtt.Capabilities {
	caps := mqtt.NewDefaultServerCapabilities()
	// Each connected client holds a queue of this many outgoing packets;
	// the default of 8,192 costs ~150 KB per client on a small board.
	caps.MaximumClientWritesPending = 1024
	if sec.WriteBuffer > 0 {
		caps.MaximumClientWritesPending = int32(sec.WriteBuffer)
	}
	// Held PUBACKs count against a client's receive quota, and the broker
	// disconnects a client that exhausts it. MQTT 3.1.1 clients cannot
	// learn the limit, so allow by default the most the protocol can
	// express; a full commit queue slows senders down instead.
	caps.ReceiveMaximum = 65535
	if sec.MaxInflight > 0 {
		caps.ReceiveMaximum = sec.MaxInflight
	}
	caps.MaximumPacketSize = sec.MaxPacketSize
	if sec.MaxClients > 0 {
		caps.MaximumClients = int64(sec.MaxClients)
	}
	return caps
}

// SetRoutes replaces the ingest routes and the ACL file's rules (acl may
// be nil) at once: a PUBLISH judged from now on is judged, and decoded, by
// routes and acl; one judged before is decoded by the routes it was
// judged by. The broker ingests by these routes, not the Ingester's.
func (b *Broker) SetRoutes(routes []Route, acl *ACL) {
	b.guard.policy.Store(newPolicy(routes, acl))
}

// Refusals returns the counters of what the broker refused.
func (b *Broker) Refusals() *Refusals { return b.refusals }

// TLSAddr returns the address of the TLS listener, or "".
func (b *Broker) TLSAddr() string { return b.tlsAddr }

// Addr returns the address the broker listens on.
func (b *Broker) Addr() string { return b.addr }

// Clients returns the number of connected clients.
func (b *Broker) Clients() int64 { return atomic.LoadInt64(&b.srv.Info.ClientsConnected) }

// Run serves until ctx ends, then disconnects every client and stops,
// waiting closeTimeout at most for the clients to go.
func (b *Broker) Run(ctx context.Context) error {
	if err := b.srv.Serve(); err != nil {
		return fmt.Errorf("mqtt broker: %w", err)
	}
	<-ctx.Done()
	b.hook.closing.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- b.srv.Close() }()
	timer := time.NewTimer(closeTimeout)
	defer timer.Stop()
	select {
	case err := <-closed:
		if err != nil {
			return fmt.Errorf("close mqtt broker: %w", err)
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("%w: %d clients still attached after %s", ErrBrokerCloseTimeout, b.Clients(), closeTimeout)
	}
}

// closeTimeout bounds how long Run waits for the broker to let go of its
// clients, beyond the write timeout the listeners give them as they close.
// A client's connection that does not close must not keep the gateway from
// stopping: what the gateway acknowledged is stored already.
const closeTimeout = 3 * time.Second

// ErrBrokerCloseTimeout is returned by Run when the broker had not let go
// of its clients closeTimeout after it was told to stop.
var ErrBrokerCloseTimeout = errors.New("mqtt broker did not close in time")

// ingestHook ingests PUBLISH packets inside the broker. See Broker.
type ingestHook struct {
	mqtt.HookBase
	srv     *mqtt.Server
	guard   *guardHook // the policy each message was judged by
	in      *Ingester
	log     *slog.Logger
	closing atomic.Bool

	mu     sync.Mutex // guards queues
	queues map[*mqtt.Client]*ackQueue
}

func (h *ingestHook) ID() string { return "cairn-ingest" }

func (h *ingestHook) Provides(b byte) bool {
	return b == mqtt.OnPublish || b == mqtt.OnDisconnect
}

// OnPublish ingests a message on a configured topic. QoS 0 messages are
// stored without waiting. QoS 1 messages are held back (the broker is told to
// ignore them), then acked and routed by the hook, in order, once settled.
// QoS 2 messages wait here for their commit, since their handshake is the
// broker's to drive.
func (h *ingestHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	h.mu.Lock()
	q := h.queues[cl]
	h.mu.Unlock()

	// The message is decoded by the routes it was judged by.
	routes := h.guard.judged(cl).routes
	now := h.in.Now()
	ctx := context.Background()
	switch pk.FixedHeader.Qos {
	case 0:
		h.in.ingest(ctx, routes, cl.ID, pk.TopicName, pk.Payload, now, func(error) {})
		return pk, nil
	case 2:
		errc := make(chan error, 1)
		if !h.in.ingest(ctx, routes, cl.ID, pk.TopicName, pk.Payload, now, func(err error) { errc <- err }) {
			return pk, nil
		}
		if err := <-errc; err != nil {
			h.log.Warn("message not stored, disconnecting its sender so it sends again", "client", cl.ID, "err", err)
			h.srv.DisconnectClient(cl, packets.ErrUnspecifiedError)
			return pk, packets.ErrRejectPacket
		}
		return pk, nil
	}

	if q == nil {
		q = h.queueFor(cl)
	}
	// The broker's own quota bookkeeping is skipped for a held message; do
	// it here, before the message can settle and give its quota back.
	cl.State.Inflight.DecreaseReceiveQuota()
	s := q.add(&pk)
	if !h.in.ingest(ctx, routes, cl.ID, pk.TopicName, pk.Payload, now, func(err error) { h.settle(cl, q, s, err) }) {
		// Not ours, but it must not overtake the client's pending acks.
		h.settle(cl, q, s, nil)
	}
	return held(pk), nil
}

// held returns what the broker is to do itself with a QoS 1 message the
// hook holds: nothing. As an ignored QoS 0 message it sends no PUBACK,
// retains and routes nothing, and is done. (Rejecting it instead had the
// broker box the whole packet, 800 bytes, for a debug log line that is
// off: half of what cairn allocated at 10,000 messages a second.) The
// broker does call the OnPublished hooks with it: no hook of cairn's
// provides that event, and one that did would see each held message
// twice, as this and when finish routes it.
func held(pk packets.Packet) packets.Packet {
	pk.FixedHeader.Qos = 0
	pk.FixedHeader.Retain = false
	pk.Ignore = true
	return pk
}

// OnDisconnect forgets the client's queue; what it still holds is routed
// without acks when settled. No group commit waits for the client any
// more.
func (h *ingestHook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.mu.Lock()
	delete(h.queues, cl)
	h.mu.Unlock()
	if !cl.Net.Inline {
		h.in.Gone(cl.ID)
	}
}

func (h *ingestHook) queueFor(cl *mqtt.Client) *ackQueue {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[cl]
	if q == nil {
		q = new(ackQueue)
		h.queues[cl] = q
	}
	return q
}

// settle marks s settled and, if its queue is not being drained, starts a
// goroutine that acks the settled messages at the head of the queue. Acks
// are written outside the writer's goroutine: a client with a slow socket
// holds up only its own acks.
func (h *ingestHook) settle(cl *mqtt.Client, q *ackQueue, s *slot, err error) {
	if q.settle(s, err) {
		go h.drain(cl, q)
	}
}

// drain finishes the settled messages at the head of q, in order, a run
// of them at a time.
func (h *ingestHook) drain(cl *mqtt.Client, q *ackQueue) {
	var run []*slot
	for {
		if run = q.popSettled(run[:0]); len(run) == 0 {
			return
		}
		h.finish(cl, q, run)
	}
}

// finish acks and routes a run of settled messages. The PUBACKs of the run
// go out in one write: one system call, not one per message.
func (h *ingestHook) finish(cl *mqtt.Client, q *ackQueue, run []*slot) {
	if h.closing.Load() {
		return // the broker is stopping: no acks; the sender will send again
	}
	var acks bytes.Buffer
	for _, s := range run {
		switch {
		case s.err != nil:
			if !q.failed {
				q.failed = true // only drain touches failed
				h.writeAcks(cl, &acks)
				h.log.Warn("message not stored, disconnecting its sender so it sends again", "client", cl.ID, "err", s.err)
				h.srv.DisconnectClient(cl, packets.ErrUnspecifiedError)
			}
			continue
		case !q.failed:
			cl.State.Inflight.IncreaseReceiveQuota()
			ack := packets.Packet{
				FixedHeader:     packets.FixedHeader{Type: packets.Puback},
				PacketID:        s.id,
				ReasonCode:      packets.CodeSuccess.Code,
				ProtocolVersion: cl.Properties.ProtocolVersion,
			}
			if err := ack.PubackEncode(&acks); err != nil {
				h.log.Error("encode puback", "client", cl.ID, "err", err)
			}
		}
	}
	h.writeAcks(cl, &acks)
	// Route what was stored to other subscribers, as the broker would have.
	for _, s := range run {
		if s.err == nil && (s.retain || atomic.LoadInt64(&h.srv.Info.Subscriptions) > 0) {
			if err := h.srv.Publish(s.topic, s.payload, s.retain, s.qos); err != nil {
				h.log.Debug("route", "client", cl.ID, "topic", s.topic, "err", err)
			}
		}
	}
}

// writeAcks writes the encoded PUBACKs in buf to the client and empties
// buf. A write error means the connection is gone; the broker notices on
// its own, and the client sends the unacknowledged messages again.
func (h *ingestHook) writeAcks(cl *mqtt.Client, buf *bytes.Buffer) {
	if buf.Len() == 0 || cl.Closed() {
		buf.Reset()
		return
	}
	cl.Lock() // the broker's own writes take the same lock
	_, err := buf.WriteTo(cl.Net.Conn)
	cl.Unlock()
	buf.Reset()
	if err != nil {
		h.log.Debug("write pubacks", "client", cl.ID, "err", err)
	}
}

// ackQueue holds one client's QoS 1 messages in arrival order until they are
// settled and acked.
type ackQueue struct {
	mu       sync.Mutex // guards slots and draining
	slots    []*slot
	draining bool

	failed bool // a message of the client could not be stored; used by drain only
}

// slot is a QoS 1 message waiting for its commit: what its PUBACK and its
// routing to other subscribers need of it, not the whole packet (800
// bytes, most of them properties it has no use for).
type slot struct {
	id      uint16
	qos     byte
	retain  bool
	topic   string
	payload []byte
	settled bool
	err     error
}

func (q *ackQueue) add(pk *packets.Packet) *slot {
	s := &slot{id: pk.PacketID, qos: pk.FixedHeader.Qos, retain: pk.FixedHeader.Retain, topic: pk.TopicName, payload: pk.Payload}
	q.mu.Lock()
	q.slots = append(q.slots, s)
	q.mu.Unlock()
	return s
}

// settle marks s settled and reports whether the caller must start draining.
func (q *ackQueue) settle(s *slot, err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	s.settled, s.err = true, err
	if q.draining || len(q.slots) == 0 || !q.slots[0].settled {
		return false
	}
	q.draining = true
	return true
}

// popSettled moves the settled messages at the head of the queue to run
// and returns it; with none, it ends the drain and returns run empty.
func (q *ackQueue) popSettled(run []*slot) []*slot {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := 0
	for i < len(q.slots) && q.slots[i].settled {
		run = append(run, q.slots[i])
		q.slots[i] = nil
		i++
	}
	q.slots = q.slots[i:]
	if i == 0 {
		q.draining = false
	}
	return run
}
