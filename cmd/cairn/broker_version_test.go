package main

import (
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// TestRun_BrokerVersion subscribes to $SYS/broker/version of the
// embedded broker: it names cairn and its version, not the library's.
func TestRun_BrokerVersion(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), localConfig))
	c := mustConnect(t, d.mqtt, "sys-reader")
	got := make(chan string, 1)
	tok := c.Subscribe("$SYS/broker/version", 0, func(_ paho.Client, m paho.Message) {
		select {
		case got <- string(m.Payload()):
		default:
		}
	})
	waitToken(t, tok)
	select {
	case v := <-got:
		if want := "cairn " + version; v != want {
			t.Errorf("$SYS/broker/version: %q, want %q", v, want)
		}
	case <-time.After(ackTimeout):
		t.Fatal("no retained $SYS/broker/version")
	}
}
