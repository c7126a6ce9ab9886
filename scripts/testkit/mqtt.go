package testkit

import (
	"errors"
	"fmt"
	"sync"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// PublisherOptions are the options of an MQTT client that behaves like a
// sensor: MQTT 3.1.1, clean session, no automatic reconnection. broker is
// a URL such as tcp://127.0.0.1:1883; connecting gives up after timeout.
// A test may add a login, TLS or a will before Connect.
func PublisherOptions(broker, clientID string, timeout time.Duration) *paho.ClientOptions {
	return paho.NewClientOptions().
		AddBroker(broker).
		SetClientID(clientID).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(timeout).
		SetWriteTimeout(10 * time.Second).
		SetKeepAlive(30 * time.Second)
}

// Connect connects a client with opts and waits up to timeout for the
// CONNACK.
func Connect(opts *paho.ClientOptions, timeout time.Duration) (paho.Client, error) {
	c := paho.NewClient(opts)
	broker := "the broker"
	if s := opts.Servers; len(s) > 0 {
		broker = s[0].Host
	}
	tok := c.Connect()
	if !tok.WaitTimeout(timeout) {
		c.Disconnect(0)
		return nil, fmt.Errorf("connect %s: no CONNACK in %s", broker, timeout)
	}
	if err := tok.Error(); err != nil {
		return nil, fmt.Errorf("connect %s: %w", broker, err)
	}
	return c, nil
}

// ConnectPublisher connects a client with PublisherOptions to the broker
// at addr (host:port), waiting up to timeout for the CONNACK.
func ConnectPublisher(addr, clientID string, timeout time.Duration) (paho.Client, error) {
	return Connect(PublisherOptions("tcp://"+addr, clientID, timeout), timeout)
}

// ErrStopped is what Window.Publish returns when it was told to stop.
var ErrStopped = errors.New("stopped")

// Window is a publisher's connection that sends at QoS 1 with at most a
// fixed number of messages unacknowledged, as a sensor with a send queue
// does. One goroutine at a time may call Publish.
type Window struct {
	addr       string
	c          paho.Client
	slots      chan struct{} // one per message in flight
	ackTimeout time.Duration
	inflight   sync.WaitGroup // the goroutines waiting for PUBACKs
}

// ConnectWindow connects a publisher to the broker at addr (host:port)
// like ConnectPublisher, with a window of size messages; a message whose
// PUBACK does not come within ackTimeout counts as unacknowledged. Close
// it.
func ConnectWindow(addr, clientID string, size int, timeout, ackTimeout time.Duration) (*Window, error) {
	c, err := ConnectPublisher(addr, clientID, timeout)
	if err != nil {
		return nil, err
	}
	return &Window{addr: addr, c: c, slots: make(chan struct{}, size), ackTimeout: ackTimeout}, nil
}

// Publish waits until fewer than size messages are unacknowledged and
// publishes payload on topic. It calls acked, from another goroutine, once
// the message's PUBACK came. It returns ErrStopped, and publishes nothing,
// if stop is closed first (a nil stop never is), and an error if the
// connection is lost.
func (w *Window) Publish(topic, payload string, stop <-chan struct{}, acked func()) error {
	select {
	case w.slots <- struct{}{}:
	case <-stop:
		return ErrStopped
	}
	if !w.c.IsConnectionOpen() {
		<-w.slots
		return fmt.Errorf("connection to %s lost", w.addr)
	}
	tok := w.c.Publish(topic, 1, false, payload)
	w.inflight.Go(func() {
		defer func() { <-w.slots }()
		if tok.WaitTimeout(w.ackTimeout) && tok.Error() == nil {
			acked()
		}
	})
	return nil
}

// Close waits until every message published got its PUBACK, an error, or
// waited ackTimeout, then disconnects.
func (w *Window) Close() {
	w.inflight.Wait()
	w.c.Disconnect(0)
}
