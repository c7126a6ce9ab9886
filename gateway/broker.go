package gateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// BrokerOptions configure the embedded broker.
type BrokerOptions struct {
	Listen   string // TCP address, e.g. "127.0.0.1:1883"; port 0 picks one
	Ingester *Ingester
	Logger   *slog.Logger
}

// Broker is the embedded MQTT broker. Messages on the Ingester's topics are
// ingested inside the broker: a QoS 1 PUBACK is sent only once the message
// is settled (stored and synced, or rejected as bad input), and only then is
// the message routed on to subscribers. The sender's later messages keep
// flowing into the same group commit meanwhile, and each client's PUBACKs
// go out in the order of its PUBLISHes.
type Broker struct {
	srv  *mqtt.Server
	hook *ingestHook
	addr string
}

// NewBroker creates the broker and binds its listener, so that Addr is known
// before Run. Don't forget to Run it.
func NewBroker(opts BrokerOptions) (*Broker, error) {
	caps := mqtt.NewDefaultServerCapabilities()
	// Each connected client holds a queue of this many outgoing packets;
	// the default of 8,192 costs ~150 KB per client on a small board.
	caps.MaximumClientWritesPending = 1024
	// Held PUBACKs count against a client's receive quota, and the broker
	// disconnects a client that exhausts it. MQTT 3.1.1 clients cannot
	// learn the limit, so allow the most the protocol can express; a full
	// commit queue slows senders down instead.
	caps.ReceiveMaximum = 65535
	srv := mqtt.New(&mqtt.Options{
		Capabilities:           caps,
		InlineClient:           true,
		Logger:                 opts.Logger,
		SysTopicResendInterval: 60,
	})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, fmt.Errorf("broker auth hook: %w", err)
	}
	hook := &ingestHook{
		srv:    srv,
		in:     opts.Ingester,
		log:    opts.Logger,
		queues: make(map[*mqtt.Client]*ackQueue),
	}
	if err := srv.AddHook(hook, nil); err != nil {
		return nil, fmt.Errorf("broker ingest hook: %w", err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "tcp", Address: opts.Listen})
	if err := srv.AddListener(tcp); err != nil {
		return nil, fmt.Errorf("mqtt.embedded.listen %s: %w", opts.Listen, err)
	}
	return &Broker{srv: srv, hook: hook, addr: tcp.Address()}, nil
}

// Addr returns the address the broker listens on.
func (b *Broker) Addr() string { return b.addr }

// Clients returns the number of connected clients.
func (b *Broker) Clients() int64 { return atomic.LoadInt64(&b.srv.Info.ClientsConnected) }

// Run serves until ctx ends, then disconnects every client and stops.
func (b *Broker) Run(ctx context.Context) error {
	if err := b.srv.Serve(); err != nil {
		return fmt.Errorf("mqtt broker: %w", err)
	}
	<-ctx.Done()
	b.hook.closing.Store(true)
	if err := b.srv.Close(); err != nil {
		return fmt.Errorf("close mqtt broker: %w", err)
	}
	return nil
}

// ingestHook ingests PUBLISH packets inside the broker. See Broker.
type ingestHook struct {
	mqtt.HookBase
	srv     *mqtt.Server
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
// drop them), then acked and routed by the hook, in order, once settled.
// QoS 2 messages wait here for their commit, since their handshake is the
// broker's to drive.
func (h *ingestHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	h.mu.Lock()
	q := h.queues[cl]
	h.mu.Unlock()

	now := time.Now()
	ctx := context.Background()
	switch pk.FixedHeader.Qos {
	case 0:
		h.in.Ingest(ctx, pk.TopicName, pk.Payload, now, func(error) {})
		return pk, nil
	case 2:
		errc := make(chan error, 1)
		if !h.in.Ingest(ctx, pk.TopicName, pk.Payload, now, func(err error) { errc <- err }) {
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
	s := q.add(pk)
	if !h.in.Ingest(ctx, pk.TopicName, pk.Payload, now, func(err error) { h.settle(cl, q, s, err) }) {
		// Not ours, but it must not overtake the client's pending acks.
		h.settle(cl, q, s, nil)
	}
	return pk, packets.ErrRejectPacket
}

// OnDisconnect forgets the client's queue; what it still holds is routed
// without acks when settled.
func (h *ingestHook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.mu.Lock()
	delete(h.queues, cl)
	h.mu.Unlock()
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
				PacketID:        s.pk.PacketID,
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
		if s.err == nil && (s.pk.FixedHeader.Retain || atomic.LoadInt64(&h.srv.Info.Subscriptions) > 0) {
			if err := h.srv.Publish(s.pk.TopicName, s.pk.Payload, s.pk.FixedHeader.Retain, s.pk.FixedHeader.Qos); err != nil {
				h.log.Debug("route", "client", cl.ID, "topic", s.pk.TopicName, "err", err)
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

type slot struct {
	pk      packets.Packet
	settled bool
	err     error
}

func (q *ackQueue) add(pk packets.Packet) *slot {
	s := &slot{pk: pk}
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
