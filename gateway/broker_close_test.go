package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// connectPacket is an MQTT 3.1.1 CONNECT with a clean session and the
// client id "c": each client takes the last one's place.
var connectPacket = []byte{0x10, 13, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 1, 'c'}

// TestBroker_CloseWhileClientsLeave closes the broker while clients
// connect and leave as fast as they can: closing the listener's clients
// must not wait for ever on the broker's client list while another client
// leaves, and Run returns nil, not ErrBrokerCloseTimeout. (mochi's own
// close of a listener's clients takes that list's read lock twice, and a
// client leaving in between, which takes its write lock, deadlocks it;
// the window is narrow, so this test shows it only now and then.)
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
		stop := make(chan struct{})
		var acked atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					c, err := net.DialTimeout("tcp", b.Addr(), time.Second)
					if err != nil {
						continue // not serving yet, or closed
					}
					c.SetDeadline(time.Now().Add(time.Second)) //nolint:errcheck // a failed read ends the try
					if _, err := c.Write(connectPacket); err == nil {
						if _, err := io.ReadFull(c, make([]byte, 4)); err == nil {
							acked.Add(1)
						}
					}
					c.Close()
				}
			})
		}
		for deadline := time.Now().Add(10 * time.Second); acked.Load() < 50; { // clients come and go
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d CONNACKs in 10 s, want 50", round, acked.Load())
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		err = <-done
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
	}
}
