package gateway

import (
	"net"
	"sync/atomic"
	"time"
)

// gatherConn is a net.Conn whose reads let a busy connection's messages
// gather for a moment: one wakeup and one system call then take several
// messages instead of each of them. A sensor bridge publishing 10,000
// messages a second sends one every 100 µs, and waking for each cost
// cairn more than everything it did with them.
//
// A read waits only while the connection is busy: when the last read from
// the socket began less than window ago and did not fill what it read
// into. A connection that sends less often than once a window is read as
// each message comes. So a message waits about a window longer (the
// runtime's timers round up to a millisecond), and only on a connection
// that sends many. A packet that comes in several pieces, a large
// one over a slow link, waits a window for each: the window is for
// streams of small messages.
//
// A read after a write to the connection does not wait: the client may
// be waiting for what was written, as one that waits for each PUBACK
// before it sends again does (each of its messages waited out the rest of
// a window: a PUBACK median of 2.41 ms with a window of 2 ms, 0.29 ms
// read at once). A stream that does not wait gets a PUBACK a group
// commit, and one read in that many goes at once.
//
// With size > 0 the reads are buffered: the MQTT client reads a packet a
// byte or a few at a time, each a system call without a buffer. Without,
// the reader brings its own (mochi's is 2 KiB).
type gatherConn struct {
	net.Conn
	window time.Duration
	began  time.Time // when the last read from the socket began
	busy   bool      // that read did not fill what it read into
	buf    []byte
	r, w   int // buf[r:w] is read and not yet taken
	waits  int // reads from the socket that waited
	// wrote is set by each write to the connection and cleared by each
	// read from the socket.
	wrote atomic.Bool
}

// newGatherConn wraps c; a window of 0 or less gathers nothing, and a
// size of 0 buffers nothing.
func newGatherConn(c net.Conn, window time.Duration, size int) *gatherConn {
	g := &gatherConn{Conn: c, window: window}
	if size > 0 {
		g.buf = make([]byte, size)
	}
	return g
}

func (g *gatherConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if g.buf == nil || g.r == g.w && len(p) >= len(g.buf) {
		return g.readSocket(p) // as bufio does: a large read needs no copy
	}
	if g.r == g.w {
		n, err := g.readSocket(g.buf)
		g.r, g.w = 0, n
		if n == 0 {
			return 0, err
		}
		// An error with data comes back with the next read, from the
		// socket again.
	}
	n := copy(p, g.buf[g.r:g.w])
	g.r += n
	return n, nil
}

// Write writes p to the connection, and lets the next read from the
// socket go at once.
func (g *gatherConn) Write(p []byte) (int, error) {
	// Before the write: once it is out, the client may answer and its
	// answer be read before a flag set after the write (a PUBACK is
	// written by another goroutine than the reader's).
	g.wrote.Store(true)
	return g.Conn.Write(p)
}

// readSocket reads into p from the connection, first waiting until a
// window has passed since the last read began if the connection is busy
// and nothing was written to it since that read.
func (g *gatherConn) readSocket(p []byte) (int, error) {
	if g.window <= 0 {
		return g.Conn.Read(p)
	}
	now := time.Now()
	if replied := g.wrote.Swap(false); g.busy && !replied {
		if d := g.window - now.Sub(g.began); d > 0 {
			time.Sleep(d)
			now = time.Now()
			g.waits++
		}
	}
	g.began = now
	n, err := g.Conn.Read(p)
	g.busy = n < len(p)
	return n, err
}
