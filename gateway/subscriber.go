package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// SubscriberOptions configure the subscriber to an external broker.
type SubscriberOptions struct {
	URL      string // e.g. tcp://127.0.0.1:1883
	ClientID string // stable: the broker keeps the session under it
	Filters  []string
	Ingester *Ingester
	Logger   *slog.Logger
	// Username and Password log in at the broker, when Username is set.
	Username string
	Password string
	// TLS is used for ssl:// and tls:// URLs.
	TLS *tls.Config
	// ReadCoalesce is how long the broker's messages may gather before
	// they are read (see gatherConn); 0 reads each as it comes.
	ReadCoalesce time.Duration
}

// Subscriber reads messages from an external broker in a persistent session
// at QoS 1 and acknowledges each one only once it is settled (see
// Ingester.Ingest). A message that could not be stored is not acknowledged:
// the subscriber reconnects so that the broker delivers it again.
//
// The broker must not have more unacknowledged messages in flight to the
// subscriber than the store's writer queue holds (Mosquitto's
// max_inflight_messages), or a full queue would stall the connection.
type Subscriber struct {
	opts      SubscriberOptions
	client    paho.Client
	connected atomic.Bool
	acks      chan paho.Message // QoS 2 messages stored, for paho to acknowledge
	stopped   chan struct{}     // closed when Run returns: acks is read no more
	// conn is the connection to the broker, the last one dialled: paho
	// dials the next only once every message of the one before was
	// handled (its router is among the workers it waits for), so a
	// message handled is one read from conn.
	conn  atomic.Pointer[batchConn]
	state *connState
	// redial asks Run to drop the connection and dial again.
	redial chan struct{}
	log    *slog.Logger

	mu      sync.Mutex // guards filters and dropped
	filters []string   // subscribed on every connection
	dropped []string   // to unsubscribe from: the session may still hold them
}

// subscriberAcks is how many stored QoS 2 messages may wait for paho to
// acknowledge them. The subscriber asks for QoS 1, so a broker sends none
// (MQTT 3.1.1, 3.8.4); a QoS 1 message's PUBACK goes by batchConn.puback.
const subscriberAcks = 64

// NewSubscriber creates a Subscriber. Don't forget to Run it.
func NewSubscriber(opts SubscriberOptions) *Subscriber {
	s := &Subscriber{
		opts:    opts,
		acks:    make(chan paho.Message, subscriberAcks),
		stopped: make(chan struct{}),
		redial:  make(chan struct{}, 1),
		log:     opts.Logger,
		filters: slices.Clone(opts.Filters),
		state:   &connState{url: opts.URL, log: opts.Logger, now: time.Now},
	}
	co := paho.NewClientOptions().
		AddBroker(opts.URL).
		SetClientID(opts.ClientID).
		SetCleanSession(false).
		SetAutoAckDisabled(true).
		SetOrderMatters(true).
		SetStore(newSessionStore()).
		SetKeepAlive(30 * time.Second).
		SetPingTimeout(10 * time.Second).
		SetConnectTimeout(10 * time.Second).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(2 * time.Second).
		SetMaxReconnectInterval(10 * time.Second).
		SetCustomOpenConnectionFn(openBatchConn(opts.ReadCoalesce, s.opened)).
		SetDefaultPublishHandler(s.handle).
		SetOnConnectHandler(s.onConnect).
		SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			if f, ok := n.(paho.ConnectionNotificationFailed); ok {
				s.state.failed(f.Reason)
			}
		}).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			s.connected.Store(false)
			s.state.broke("connection lost: " + explainConnectError(err))
			s.log.Warn("lost connection to mqtt broker, reconnecting", "url", opts.URL, "err", err)
		})
	if opts.Username != "" {
		co.SetUsername(opts.Username).SetPassword(opts.Password)
	}
	if opts.TLS != nil {
		co.SetTLSConfig(opts.TLS)
	}
	s.client = paho.NewClient(co)
	return s
}

// Connection says how the connection to the broker is doing: whether it
// is up, and if not, why the last attempt failed.
func (s *Subscriber) Connection() BrokerConnection {
	c := s.state.get()
	c.Connected = s.connected.Load()
	return c
}

// opened is given each connection paho dials. Its PUBACKs are written
// past paho (batchConn.puback), so every write of the connection moves on
// paho's time of the last packet sent, which its keepalive pings by: a
// connection busy with PUBACKs needs no PINGREQ, as when paho wrote them.
func (s *Subscriber) opened(b *batchConn) {
	if c, ok := s.client.(interface{ UpdateLastSent() }); ok {
		b.wrote = c.UpdateLastSent // before any Write: the sender reads it after one
	}
	s.conn.Store(b)
}

// onConnect subscribes on every (re)connection: the broker may have lost
// the session.
func (s *Subscriber) onConnect(c paho.Client) {
	s.mu.Lock()
	filters, dropped := slices.Clone(s.filters), slices.Clone(s.dropped)
	s.mu.Unlock()
	if err := subscribe(c, filters); err != nil {
		s.log.Error("subscribe failed, reconnecting", "url", s.opts.URL, "err", err)
		s.state.broke(err.Error())
		s.requestRedial()
		return
	}
	if err := unsubscribe(c, dropped); err != nil {
		s.log.Warn("unsubscribe failed; trying again on the next connection", "url", s.opts.URL, "topics", dropped, "err", err)
	} else {
		s.forget(dropped)
	}
	failed, since := s.state.connected()
	s.connected.Store(true)
	if failed > 0 {
		s.log.Info("connected to mqtt broker", "url", s.opts.URL, "client_id", s.opts.ClientID, "topics", filters,
			"failed_attempts", failed, "failing_since", since.Format(time.RFC3339))
		return
	}
	s.log.Info("connected to mqtt broker", "url", s.opts.URL, "client_id", s.opts.ClientID, "topics", filters)
}

// SetFilters changes the subscriptions to filters: it subscribes to the
// new ones and then unsubscribes from the ones that are gone, at once if
// connected, else on the next connection. Route the new filters' topics
// (Ingester.SetRoutes) before: a message on no route is acknowledged
// without being stored. An error means the broker did not confirm; the
// subscriber reconnects and subscribes again.
func (s *Subscriber) SetFilters(filters []string) error {
	s.mu.Lock()
	var added, gone []string
	for _, f := range filters {
		if !slices.Contains(s.filters, f) {
			added = append(added, f)
		}
	}
	for _, f := range s.filters {
		if !slices.Contains(filters, f) {
			gone = append(gone, f)
		}
	}
	s.filters = slices.Clone(filters)
	s.dropped = slices.DeleteFunc(s.dropped, func(f string) bool { return slices.Contains(filters, f) })
	s.dropped = append(s.dropped, gone...)
	s.mu.Unlock()
	if !s.client.IsConnectionOpen() {
		return nil
	}
	if err := subscribe(s.client, added); err != nil {
		s.requestRedial()
		return err
	}
	if err := unsubscribe(s.client, gone); err != nil {
		return err
	}
	s.forget(gone)
	return nil
}

// forget removes filters from those to unsubscribe from.
func (s *Subscriber) forget(filters []string) {
	s.mu.Lock()
	s.dropped = slices.DeleteFunc(s.dropped, func(f string) bool { return slices.Contains(filters, f) })
	s.mu.Unlock()
}

// subscribe subscribes c to filters at QoS 1 and waits for the broker's
// answer.
func subscribe(c paho.Client, filters []string) error {
	if len(filters) == 0 {
		return nil
	}
	m := make(map[string]byte, len(filters))
	for _, f := range filters {
		m[f] = 1
	}
	return wait(c.SubscribeMultiple(m, nil), "subscribe")
}

// unsubscribe unsubscribes c from filters and waits for the broker's
// answer.
func unsubscribe(c paho.Client, filters []string) error {
	if len(filters) == 0 {
		return nil
	}
	return wait(c.Unsubscribe(filters...), "unsubscribe")
}

func wait(tok paho.Token, what string) error {
	if !tok.WaitTimeout(10 * time.Second) {
		return fmt.Errorf("%s: no answer in 10s", what)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// handle runs on paho's single delivery goroutine, in arrival order. It
// must not block for long: Ingest only decodes and queues for the commit.
// A QoS 1 message, once settled, is acknowledged on the connection it came
// by (batchConn.puback); a QoS 2 one by paho, which keeps the state of
// its exchange; a QoS 0 one not at all.
func (s *Subscriber) handle(_ paho.Client, m paho.Message) {
	qos, conn, id := m.Qos(), s.conn.Load(), m.MessageID()
	settled := func(err error) {
		switch {
		case err != nil:
			s.requestRedial()
		case qos == 1 && conn != nil:
			conn.puback(id)
		case qos == 2:
			select {
			case s.acks <- m:
			case <-s.stopped: // the broker sends it again on the next start
			}
		}
	}
	if !s.opts.Ingester.Ingest(context.Background(), m.Topic(), m.Payload(), s.opts.Ingester.Now(), settled) {
		// Not ours (overlapping subscriptions): ack it in its turn.
		s.opts.Ingester.Settle(context.Background(), settled)
	}
}

func (s *Subscriber) requestRedial() {
	select {
	case s.redial <- struct{}{}:
	default:
	}
}

// Run connects, retrying until the broker answers, and serves until ctx
// ends. It returns nil after a clean stop.
func (s *Subscriber) Run(ctx context.Context) error {
	defer close(s.stopped)
	ackDone := make(chan struct{})
	go func() {
		defer close(ackDone)
		for {
			select {
			case m := <-s.acks:
				m.Ack()
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { <-ackDone }()
	s.client.Connect() // retries in the background (ConnectRetry)
	for {
		select {
		case <-ctx.Done():
			s.connected.Store(false)
			s.client.Disconnect(250)
			return nil
		case <-s.redial:
			// Unacked messages come back once the session resumes. Let
			// the other failed messages of the commit ask too, then dial
			// once.
			s.connected.Store(false)
			s.client.Disconnect(250)
			select {
			case <-time.After(redialDelay):
			case <-ctx.Done():
				return nil
			}
			select {
			case <-s.redial:
			default:
			}
			s.log.Warn("reconnecting so that the broker sends unstored messages again", "url", s.opts.URL)
			if !s.reconnect(ctx) {
				return nil
			}
		}
	}
}

// reconnect asks paho to connect again after a Disconnect, which returns
// after 250 ms whether or not paho has finished disconnecting (its router
// may still be handing over the last connection's messages). paho refuses
// a Connect at once while it is not yet disconnected, and would then never
// dial again: reconnect asks again every redialDelay until paho takes it
// (it then retries in the background, ConnectRetry) or ctx ends, and
// reports whether it did.
func (s *Subscriber) reconnect(ctx context.Context) bool {
	for {
		tok := s.client.Connect()
		select {
		case <-tok.Done():
			if tok.Error() == nil {
				return true
			}
			s.log.Debug("mqtt client not ready to reconnect yet", "err", tok.Error())
		case <-time.After(refusalWait):
			return true // dialling, and retrying until it connects
		case <-ctx.Done():
			return false
		}
		select {
		case <-time.After(redialDelay):
		case <-ctx.Done():
			return false
		}
	}
}

// refusalWait is how long reconnect waits for paho to refuse a Connect;
// one it takes is not done sooner unless the broker answered at once.
const refusalWait = 200 * time.Millisecond

// redialDelay is how long the subscriber waits after dropping the
// connection because a message could not be stored.
const redialDelay = time.Second
