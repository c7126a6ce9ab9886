package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// countingConn counts the reads from its connection.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// sendSpaced writes n numbered messages to c, sleeping gap between them,
// then closes c, and returns what it wrote.
func sendSpaced(c net.Conn, n int, gap time.Duration) ([]byte, error) {
	defer c.Close()
	var all bytes.Buffer
	for i := range n {
		m := fmt.Appendf(nil, `{"n":%d,"temperature":21.5}`+"\n", i)
		all.Write(m)
		if _, err := c.Write(m); err != nil {
			return all.Bytes(), err
		}
		time.Sleep(gap)
	}
	return all.Bytes(), nil
}

// readAll reads r until it ends, chunk bytes at a time, as mochi's reader
// (2 KiB) or the MQTT client (a byte or a few) do.
func readAll(r io.Reader, chunk int) ([]byte, error) {
	var got bytes.Buffer
	p := make([]byte, chunk)
	for {
		n, err := r.Read(p)
		got.Write(p[:n])
		if errors.Is(err, io.EOF) {
			return got.Bytes(), nil
		}
		if err != nil {
			return got.Bytes(), err
		}
	}
}

// TestGatherConn_ReadsABusyConnectionOncePerWindow sends a message every
// 100 µs or so: the reader reads the socket about once a window, each time
// what came meanwhile, and gets every byte in order. Without the window it
// reads each message on its own.
func TestGatherConn_ReadsABusyConnectionOncePerWindow(t *testing.T) {
	const n, window = 400, 20 * time.Millisecond
	for _, size := range []int{0, gatherBuffer} {
		t.Run(fmt.Sprintf("buffer=%d", size), func(t *testing.T) {
			client, server := tcpPair(t)
			counted := &countingConn{Conn: server}
			g := newGatherConn(counted, window, size)
			chunk := 2048
			if size > 0 {
				chunk = 3 // the MQTT client's header reads
			}
			var want []byte
			var sendErr error
			sent := make(chan struct{})
			start := time.Now()
			go func() {
				want, sendErr = sendSpaced(client, n, 100*time.Microsecond)
				close(sent)
			}()
			got, err := readAll(g, chunk)
			elapsed := time.Since(start)
			<-sent
			if err != nil || sendErr != nil {
				t.Fatal(err, sendErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want the %d sent, in order", len(got), len(want))
			}
			// One read a window, and a few more: a read that fills the
			// buffer does not wait, nor does the one after it.
			if most := int(elapsed/window) + 2*len(want)/2048 + 4; counted.reads > most || counted.reads > n/4 {
				t.Errorf("%d reads from the socket for %d messages in %v; want at most %d and under %d",
					counted.reads, n, elapsed.Round(time.Millisecond), most, n/4)
			}
			if g.waits == 0 {
				t.Error("no read waited for the window")
			}
			t.Logf("%d messages in %d reads from the socket over %v", n, counted.reads, elapsed.Round(time.Millisecond))
		})
	}
}

// TestGatherConn_ReadsAQuietConnectionAtOnce sends a message every 150 ms,
// less often than once a window of 100 ms: each is read as it comes, not
// a window later.
func TestGatherConn_ReadsAQuietConnectionAtOnce(t *testing.T) {
	const window = 100 * time.Millisecond
	client, server := tcpPair(t)
	g := newGatherConn(server, window, 0)
	go func() {
		defer client.Close()
		for range 5 {
			m := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
			if _, err := client.Write(m); err != nil {
				return // the reader fails on the short stream
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	var got []byte
	p := make([]byte, 2048)
	messages := 0
	for {
		n, err := g.Read(p)
		now := time.Now()
		got = append(got, p[:n]...)
		for ; len(got) >= 8; got = got[8:] {
			messages++
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(got)))
			if late := now.Sub(sent); late > window/2 {
				t.Errorf("a message was read %v after it was sent; a connection this quiet must be read at once", late.Round(time.Millisecond))
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if messages != 5 || len(got) != 0 {
		t.Errorf("read %d messages and %d bytes more, want the 5 sent", messages, len(got))
	}
}

// TestGatherConn_BuffersSmallReads reads a burst a byte at a time, as the
// MQTT client reads a packet's header: a few reads of the socket take it
// all. An error from the socket comes once what was read is taken.
func TestGatherConn_BuffersSmallReads(t *testing.T) {
	client, server := tcpPair(t)
	counted := &countingConn{Conn: server}
	g := newGatherConn(counted, 0, gatherBuffer)
	want := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	go func() {
		client.Write(want)
		client.Close()
	}()
	got, err := readAll(g, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d sent, in order", len(got), len(want))
	}
	if most := 2*len(want)/gatherBuffer + 4; counted.reads > most {
		t.Errorf("%d reads from the socket for %d bytes read a byte at a time; want at most %d", counted.reads, len(want), most)
	}
	if n, err := g.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read after the end: %d, %v; want 0, EOF", n, err)
	}
}

// TestGatherConn_ReadsAfterAReplyAtOnce: a client that sends a message
// and waits for the reply before it sends the next, as one that waits
// for each PUBACK does, is read at once after each reply written through
// the connection, never waiting a window; replies written past it (as
// the gatherConn cannot see) leave each read after the first to wait.
func TestGatherConn_ReadsAfterAReplyAtOnce(t *testing.T) {
	const n, window = 20, 50 * time.Millisecond
	for _, through := range []bool{true, false} {
		t.Run(fmt.Sprintf("replies through it %v", through), func(t *testing.T) {
			client, server := tcpPair(t)
			g := newGatherConn(server, window, 0)
			reply := net.Conn(g)
			if !through {
				reply = server
			}
			done := make(chan error, 1)
			go func() {
				p := make([]byte, 2048)
				for range n {
					if _, err := g.Read(p); err != nil {
						done <- err
						return
					}
					if _, err := reply.Write([]byte{0x40}); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			ack := make([]byte, 1)
			for i := range n {
				if _, err := fmt.Fprintf(client, `{"n":%d}`, i); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(client, ack); err != nil {
					t.Fatalf("reply %d: %v", i, err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			switch {
			case through && g.waits != 0:
				t.Errorf("%d of %d reads after a reply waited a window; want none", g.waits, n)
			case !through && g.waits < n/2:
				t.Errorf("%d of %d reads waited with the replies written past the gatherConn; want most (the test sees nothing)", g.waits, n)
			}
		})
	}
}
