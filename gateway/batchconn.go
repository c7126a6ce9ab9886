package gateway

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"sync"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	"golang.org/x/net/proxy"
)

// batchConn is a net.Conn whose writes are gathered and sent by a goroutine
// of its own, as many at a time as have come meanwhile. The subscriber
// acknowledges a group commit's messages in a burst, each with a PUBACK of
// 4 bytes that the MQTT client writes on its own; a system call for each
// took a sixth of cairn's CPU while it drained a backlog.
//
// A Write returns once its bytes are queued; an error of the connection
// is returned by the Writes after it, and closes the connection, so that
// its reader fails too and the client reconnects. What was queued but not
// sent is lost with the connection, as it would be in the kernel's buffer:
// a PUBACK that never arrived has the broker deliver the message again.
type batchConn struct {
	net.Conn
	mu      sync.Mutex
	room    sync.Cond // signalled when the sender takes the queue
	queue   []byte
	err     error // the first error; Writes return it from then on
	closing bool
	kick    chan struct{} // wakes the sender
	sent    chan struct{} // closed when the sender has stopped
	// wrote, if set before the first Write, is called after each write
	// to the connection that succeeded.
	wrote func()
}

// batchConnMax is how many bytes may wait to be sent: a Write beyond it
// waits for the sender.
const batchConnMax = 256 << 10

// closeFlushTimeout bounds how long Close tries to send what waits (the
// DISCONNECT, say).
const closeFlushTimeout = time.Second

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c, kick: make(chan struct{}, 1), sent: make(chan struct{})}
	b.room.L = &b.mu
	go b.send()
	return b
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for b.err == nil && !b.closing && len(b.queue) > 0 && len(b.queue)+len(p) > batchConnMax {
		b.room.Wait()
	}
	if b.err == nil && b.closing {
		b.err = net.ErrClosed
	}
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.queue = append(b.queue, p...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	return len(p), nil
}

// send writes what was queued, whenever woken, until the connection closes
// or fails.
func (b *batchConn) send() {
	defer close(b.sent)
	var out []byte
	for {
		<-b.kick
		// Let the writer go on first: a burst of writes is then sent in
		// one go, not the first of them alone.
		runtime.Gosched()
		b.mu.Lock()
		out, b.queue = b.queue, out[:0]
		closing := b.closing
		b.room.Broadcast()
		b.mu.Unlock()
		if len(out) > 0 {
			if _, err := b.Conn.Write(out); err != nil {
				b.fail(err)
				return
			}
			if b.wrote != nil {
				b.wrote()
			}
		}
		if closing {
			return
		}
	}
}

// fail records err, wakes waiting Writes and closes the connection.
func (b *batchConn) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.room.Broadcast()
	b.mu.Unlock()
	b.Conn.Close()
}

// Close sends what waits, for a second at most, and closes the connection.
func (b *batchConn) Close() error {
	b.mu.Lock()
	already := b.closing
	b.closing = true
	b.room.Broadcast()
	b.mu.Unlock()
	if !already {
		b.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
		select {
		case b.kick <- struct{}{}:
		default:
		}
		<-b.sent
	}
	return b.Conn.Close()
}

// puback queues the PUBACK of the QoS 1 message with packet identifier
// id, as paho would write it (MQTT 3.1.1, 3.4): a fixed header of type 4
// and a remaining length of 2, then the identifier. Writing it here, not
// through paho's Message.Ack, spares each message paho's hand-offs between
// three goroutines and four allocations; a group commit's PUBACKs leave in
// one write. It is dropped, as paho drops an Ack after the connection
// is lost, once the connection has failed or closed: the broker then
// delivers the message again on the next one.
func (b *batchConn) puback(id uint16) {
	b.mu.Lock()
	if b.err != nil || b.closing {
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, 0x40, 0x02, byte(id>>8), byte(id))
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// openBatchConn returns the client's CustomOpenConnectionFn: it dials the
// broker as the MQTT client would (a proxy from ALL_PROXY and NO_PROXY
// included) and wraps the connection in a batchConn, over a gatherConn
// with a window of gather that buffers the client's reads. opened is
// given each connection made.
func openBatchConn(gather time.Duration, opened func(*batchConn)) paho.OpenConnectionFunc {
	return func(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
		conn, err := dialBroker(uri, o)
		if err != nil {
			return nil, err
		}
		b := newBatchConn(newGatherConn(conn, gather, gatherBuffer))
		opened(b)
		return b, nil
	}
}

// gatherBuffer is the size of the buffer of the external broker's
// connection: the MQTT client reads a packet's header a byte at a time.
const gatherBuffer = 16 << 10

// dialBroker dials the broker as the MQTT client would, TLS included.
func dialBroker(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
	var dialer net.Dialer
	if o.Dialer != nil {
		dialer = *o.Dialer
	}
	if o.ConnectTimeout > 0 {
		dialer.Timeout = o.ConnectTimeout
	}
	conn, err := proxy.FromEnvironmentUsing(&dialer).Dial("tcp", uri.Host)
	if err != nil {
		return nil, err
	}
	switch uri.Scheme {
	case "tcp", "mqtt":
	case "ssl", "tls", "mqtts":
		tc := tls.Client(conn, tlsFor(o.TLSConfig, uri.Hostname()))
		if o.ConnectTimeout > 0 {
			tc.SetDeadline(time.Now().Add(o.ConnectTimeout))
		}
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, err
		}
		tc.SetDeadline(time.Time{})
		conn = tc
	default:
		conn.Close()
		return nil, fmt.Errorf("unknown protocol %q", uri.Scheme)
	}
	return conn, nil
}

// tlsFor returns c, with the server name to check set to host when c has
// none.
func tlsFor(c *tls.Config, host string) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	}
	if c.ServerName != "" || c.InsecureSkipVerify {
		return c
	}
	c = c.Clone()
	c.ServerName = host
	return c
}
