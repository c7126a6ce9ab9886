package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/listeners"
	"github.com/cairn-gateway/cairn/third_party/mochi/packets"
)

// connectTimeout is how long a new connection has for its TLS handshake
// and its CONNECT packet. After the CONNECT, the client's keepalive sets
// the deadline.
const connectTimeout = 10 * time.Second

// listener is a TCP or TLS listener for the embedded broker that bounds
// the connections it holds open (those still to send their CONNECT
// included), gives each one connectTimeout to handshake and connect, and
// counts why connections end badly. It implements mochi's
// listeners.Listener.
type listener struct {
	id       string
	address  string
	tls      *tls.Config // nil for plain TCP
	maxConns int64
	gather   time.Duration // gatherConn's window; 0 for none
	refusals *Refusals
	log      *slog.Logger
	srv      *mqtt.Server // whose clients Close disconnects

	ln     net.Listener
	open   atomic.Int64 // connections being served
	closed atomic.Bool

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
}

func (l *listener) ID() string       { return l.id }
func (l *listener) Protocol() string { return "tcp" }

func (l *listener) Address() string {
	if l.ln != nil {
		return BoundAddress(l.address, l.ln.Addr())
	}
	return l.address
}

// BoundAddress returns the address of a listener bound as configured
// (host:port, the port 0 to pick one) at bound: the configured host, so
// that "0.0.0.0:1883" is not shown as the kernel's "[::]:1883", with the
// bound port.
func BoundAddress(configured string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(configured)
	_, port, berr := net.SplitHostPort(bound.String())
	if err != nil || berr != nil {
		return bound.String()
	}
	return net.JoinHostPort(host, port)
}

// Init binds the address.
func (l *listener) Init(log *slog.Logger) error {
	ln, err := net.Listen("tcp", l.address)
	if err != nil {
		return err
	}
	l.ln = ln
	l.conns = make(map[net.Conn]struct{})
	return nil
}

// Serve accepts connections until Close, and hands each to establish.
func (l *listener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if l.closed.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of file descriptors and the like: wait, do not spin.
			l.log.Warn("mqtt accept", "listener", l.id, "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if l.open.Add(1) > l.maxConns {
			l.open.Add(-1)
			l.refusals.add(RefuseMaxClients, remoteIP(conn))
			conn.Close()
			continue
		}
		go l.serveConn(conn, establish)
	}
}

func (l *listener) serveConn(conn net.Conn, establish listeners.EstablishFn) {
	defer l.open.Add(-1)
	if !l.track(conn) {
		conn.Close()
		return
	}
	defer l.untrack(conn)
	if err := conn.SetDeadline(time.Now().Add(connectTimeout)); err != nil {
		conn.Close()
		return
	}
	if l.gather > 0 {
		// Under TLS, so that its records gather too. mochi reads
		// through a buffer of its own.
		conn = newGatherConn(conn, l.gather, 0)
	}
	if l.tls != nil {
		tc := tls.Server(conn, l.tls)
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			l.refusals.add(RefuseBadCertificate, remoteIP(conn), "err", err)
			conn.Close()
			return
		}
		conn = tc
	}
	err := establish(l.id, conn)
	if reason := endReason(err); reason != "" {
		l.refusals.add(reason, remoteIP(conn), "err", err)
	}
}

// endReason classifies the error that ended a connection: "" for a normal
// end, or a refusal that the guard has not counted already.
func endReason(err error) string {
	var code packets.Code
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return ""
	case errors.Is(err, packets.ErrPacketTooLarge):
		return RefusePacketTooLarge
	case errors.Is(err, packets.ErrReceiveMaximum):
		return RefuseInflight
	case errors.Is(err, packets.ErrBadUsernameOrPassword):
		return "" // counted by the guard
	case errors.Is(err, packets.ErrServerBusy):
		return RefuseMaxClients
	case strings.HasPrefix(err.Error(), "read connection:") && errors.Is(err, os.ErrDeadlineExceeded):
		return RefuseConnectTimeout
	case strings.HasPrefix(err.Error(), "read connection:"):
		return RefuseMalformed
	case errors.As(err, &code) && code.Code >= packets.ErrUnspecifiedError.Code:
		switch code {
		case packets.ErrNotAuthorized, packets.ErrSessionTakenOver, packets.ErrKeepAliveTimeout,
			packets.ErrServerShuttingDown, packets.CodeDisconnect:
			return ""
		}
		return RefuseMalformed
	}
	return ""
}

// track remembers an open connection, for Close, and reports whether the
// listener is still open.
func (l *listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Close stops accepting, closes the clients of the listener and the
// connections that have not sent their CONNECT yet. Every write to them
// gets closeWriteTimeout first: the broker writes each client a DISCONNECT
// under the lock its writes hold, and a client that stopped reading would
// otherwise keep a write, that lock and the close waiting for ever.
//
// It disconnects the clients itself rather than with mochi's close
// function, whose Clients.GetByListener takes the clients' read lock
// twice: a client leaving in between (Clients.Delete, the write lock)
// deadlocks it, and the broker's Close with it.
func (l *listener) Close(listeners.CloseFn) {
	if !l.closed.CompareAndSwap(false, true) {
		return
	}
	if l.ln != nil {
		l.ln.Close()
	}
	deadline := time.Now().Add(closeWriteTimeout)
	l.mu.Lock()
	for c := range l.conns {
		c.SetWriteDeadline(deadline) //nolint:errcheck // a closed conn fails its writes anyway
	}
	l.mu.Unlock()
	for _, cl := range l.srv.Clients.GetAll() {
		if cl.Net.Listener == l.id && !cl.Closed() {
			l.srv.DisconnectClient(cl, packets.ErrServerShuttingDown) //nolint:errcheck // the client is stopped whatever the DISCONNECT's fate
		}
	}
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
}

// closeWriteTimeout bounds each write to a client once its listener closes.
const closeWriteTimeout = time.Second

// remoteIP returns the address of a connection's peer without its port: a
// flood from one host is logged once a minute, not once per port.
func remoteIP(c net.Conn) string { return remoteHost(c.RemoteAddr().String()) }

// IsLoopback reports whether a listen address (host:port) is on loopback
// only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
