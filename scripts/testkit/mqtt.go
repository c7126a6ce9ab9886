package testkit

import (
	"fmt"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// ConnectPublisher connects an MQTT client that behaves like a sensor
// (MQTT 3.1.1, clean session, no automatic reconnection) to the broker
// at addr (host:port), waiting up to timeout for the CONNACK.
func ConnectPublisher(addr, clientID string, timeout time.Duration) (paho.Client, error) {
	opts := paho.NewClientOptions().
		AddBroker("tcp://" + addr).
		SetClientID(clientID).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(timeout).
		SetWriteTimeout(10 * time.Second).
		SetKeepAlive(30 * time.Second)
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(timeout) {
		c.Disconnect(0)
		return nil, fmt.Errorf("connect %s: no CONNACK in %s", addr, timeout)
	}
	if err := tok.Error(); err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	return c, nil
}
