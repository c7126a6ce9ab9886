package gateway

import (
	"strings"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

// sessionStore is paho's MemoryStore without its copy of each QoS 1
// message received. paho keeps that copy until the PUBACK goes, but on a
// reconnection it discards such copies (it resumes only the QoS 2 ones):
// the broker, which holds the persistent session, sends the message
// again. Keeping the copy cost a lock, a map entry and its copy per
// message (the delete after the PUBACK finds nothing, and says nothing:
// paho's loggers are off). What paho sends (subscriptions) and QoS 2 state are kept as
// paho keeps them.
type sessionStore struct {
	*paho.MemoryStore
}

func newSessionStore() sessionStore { return sessionStore{paho.NewMemoryStore()} }

// Put keeps m, unless it is a QoS 1 message received.
func (s sessionStore) Put(key string, m packets.ControlPacket) {
	if p, ok := m.(*packets.PublishPacket); ok && p.Qos == 1 && strings.HasPrefix(key, "i.") {
		return
	}
	s.MemoryStore.Put(key, m)
}
