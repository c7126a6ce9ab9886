package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// connectPacket returns an MQTT 3.1.1 CONNECT with a clean session and
// client id id (of fewer than 100 bytes).
func connectPacket(id string) []byte {
	p := []byte{0x10, byte(12 + len(id)), 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, byte(len(id))}
	return append(p, id...)
}

// TestBroker_CloseWhileClientsLeave closes the broker while its clients
// leave: closing the listener's clients must not wait for ever on the
// broker's client list while a client leaves, and Run returns nil, not
// ErrBrokerCloseTimeout. (mochi's own close of a listener's clients
// takes that list's read lock twice, and a client leaving in between,
// which takes its write lock, deadlocks it; the window is narrow, so
// this test shows it only now and then.)
func TestBroker_CloseWhileClientsLeave(t *testing.T) {
	_, w := testkit.StartWriter(t, buffer.Options{}, buffer.WriterOptions{})
	in := NewIngester(w, IngesterOptions{})
	log := slog.New(slog.DiscardHandler)
	for round := range 40 {
		b, err := NewBroker(BrokerOptions{Listen: "127.0.0.1:0", Ingester: in, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Run(ctx) }()
		conns := make([]net.Conn, 32)
		for i := range conns {
			c, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a failed write or read fails the test
			if _, err := c.Write(connectPacket(fmt.Sprintf("c%02d", i))); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
				t.Fatalf("round %d: client %d: no CONNACK: %v", round, i, err)
			}
			conns[i] = c
		}
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() { c.Close() })
		}
		cancel()
		err = <-done
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
	}
}
