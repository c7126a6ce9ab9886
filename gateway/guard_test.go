package gateway

import (
	"log/slog"
	"testing"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/packets"
)

// kitchenPasswords is a password file with one user, kitchen, whose
// password is "pw".
func kitchenPasswords(t testing.TB) *Passwords {
	t.Helper()
	hash, err := HashPassword([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pw, err := ParsePasswords([]byte("kitchen:" + hash))
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// newTestGuard returns a guard with one user, kitchen, connected as cl on
// a listener that lets no anonymous client in.
func newTestGuard(t testing.TB) (*guardHook, *mqtt.Client) {
	t.Helper()
	p, err := ParsePattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	routes := []Route{{Pattern: p}}
	h := &guardHook{
		passwords: kitchenPasswords(t),
		anonymous: map[string]bool{"tcp": false},
		certUser:  map[string]bool{},
		rate:      1e9,
		refusals:  NewRefusals(slog.New(slog.DiscardHandler)),
	}
	h.policy.Store(newPolicy(routes, nil))
	cl := &mqtt.Client{ID: "kitchen-1"}
	cl.Net.Listener = "tcp"
	cl.Net.Remote = "192.0.2.1:40000"
	var pk packets.Packet
	pk.Connect.Username, pk.Connect.Password = []byte("kitchen"), []byte("pw")
	if !h.OnConnectAuthenticate(cl, pk) {
		t.Fatal("kitchen refused")
	}
	return h, cl
}

// TestGuard_HotPathDoesNotAllocate: the checks every message of a sensor
// passes cost no allocation.
func TestGuard_HotPathDoesNotAllocate(t *testing.T) {
	h, cl := newTestGuard(t)
	pub := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "sensors/kitchen/telemetry"}
	if !h.OnACLCheck(cl, pub.TopicName, true) {
		t.Fatal("kitchen may not publish to its own topic")
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := h.OnPacketRead(cl, pub); err != nil {
			t.Fatal(err)
		}
		if !h.OnACLCheck(cl, pub.TopicName, true) {
			t.Fatal("refused")
		}
		h.Provides(mqtt.OnPublish)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per message, want 0", allocs)
	}
	if h.OnACLCheck(cl, "sensors/garage/telemetry", true) {
		t.Error("kitchen may publish as garage")
	}
	if n := h.refusals.Counts()[RefuseOtherDevice]; n != 1 {
		t.Errorf("%s: %d, want 1", RefuseOtherDevice, n)
	}
}

func BenchmarkGuard_Publish(b *testing.B) {
	h, cl := newTestGuard(b)
	pub := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "sensors/kitchen/telemetry"}
	for b.Loop() {
		h.OnPacketRead(cl, pub) //nolint:errcheck // never fails here
		h.OnACLCheck(cl, pub.TopicName, true)
	}
}
