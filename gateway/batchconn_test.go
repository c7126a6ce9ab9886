package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

// tcpPair returns both ends of a TCP connection on the loopback.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestBatchConn_SendsEveryWriteInOrder writes more than the queue holds,
// in small writes as PUBACKs are, and closes at once: the peer reads every
// byte, in order, and then the end of the stream.
func TestBatchConn_SendsEveryWriteInOrder(t *testing.T) {
	c, peer := tcpPair(t)
	b := newBatchConn(c)
	var want bytes.Buffer
	got := make(chan []byte)
	go func() {
		all, _ := io.ReadAll(peer)
		got <- all
	}()
	for i := range 200_000 { // 800 kB: the queue fills and Write waits
		p := []byte{0x40, 0x02, byte(i >> 8), byte(i)}
		want.Write(p)
		if n, err := b.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if all := <-got; !bytes.Equal(all, want.Bytes()) {
		t.Fatalf("peer read %d bytes, want the %d written, in order", len(all), want.Len())
	}
	if _, err := b.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: got %v, want net.ErrClosed", err)
	}
}

// TestBatchConn_AFailedSendFailsLaterWrites: once the peer is gone, writes
// fail (so the client reconnects) and the connection is closed, so that
// its reader fails too.
func TestBatchConn_AFailedSendFailsLaterWrites(t *testing.T) {
	c, peer := tcpPair(t)
	b := newBatchConn(c)
	peer.(*net.TCPConn).SetLinger(0) // a reset, not an orderly close
	peer.Close()
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		_, err = b.Write(make([]byte, 4096))
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Fatal("writes to a reset connection kept succeeding")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, rerr := c.Read(make([]byte, 1)); !errors.Is(rerr, net.ErrClosed) {
		t.Errorf("read after a failed send: got %v, want the connection closed (net.ErrClosed)", rerr)
	}
	b.Close()
}

// TestBatchConn_Puback: PUBACKs queued among the client's own writes reach
// the peer in order as the packets paho would have written, each one
// whole, and one queued after the connection closed is dropped.
func TestBatchConn_Puback(t *testing.T) {
	c, peer := tcpPair(t)
	b := newBatchConn(c)
	ping := packets.NewControlPacket(packets.Pingreq)
	ids := []uint16{1, 2, 255, 256, 0x1234, 65535}
	for i, id := range ids {
		b.puback(id)
		if i == 2 {
			if err := ping.Write(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b.puback(7) // after Close: dropped
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []string
	for {
		p, err := packets.ReadPacket(peer)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after %v: %v", got, err)
			}
			break
		}
		switch p := p.(type) {
		case *packets.PubackPacket:
			got = append(got, fmt.Sprintf("puback %d", p.MessageID))
		default:
			got = append(got, p.String())
		}
	}
	want := []string{"puback 1", "puback 2", "puback 255", ping.String(), "puback 256", "puback 4660", "puback 65535"}
	if !slices.Equal(got, want) {
		t.Errorf("peer read\n%q\nwant\n%q", got, want)
	}
}
