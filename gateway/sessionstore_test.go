package gateway

import (
	"testing"

	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

// TestSessionStore_KeepsWhatPahoResumes: a QoS 1 message received is not
// kept (paho discards it on a reconnection, and the broker sends it
// again); a QoS 2 one, and what the client sends, are.
func TestSessionStore_KeepsWhatPahoResumes(t *testing.T) {
	s := newSessionStore()
	s.Open()
	defer s.Close()
	publish := func(qos byte, id uint16) *packets.PublishPacket {
		p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		p.Qos, p.MessageID, p.TopicName = qos, id, "sensors/a/t"
		return p
	}
	sub := packets.NewControlPacket(packets.Subscribe).(*packets.SubscribePacket)
	sub.MessageID = 3
	s.Put("i.1", publish(1, 1))
	s.Put("i.2", publish(2, 2))
	s.Put("o.3", sub)
	s.Put("o.4", publish(1, 4))
	got := map[string]bool{}
	for _, k := range s.All() {
		got[k] = true
	}
	if got["i.1"] || !got["i.2"] || !got["o.3"] || !got["o.4"] || len(got) != 3 {
		t.Errorf("kept %v; want i.2, o.3 and o.4", got)
	}
	s.Del("i.1") // the PUBACK of the QoS 1 message: nothing to delete
	if len(s.All()) != 3 {
		t.Errorf("after deleting the QoS 1 message's key: %v", s.All())
	}
}
