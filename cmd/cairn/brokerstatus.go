package main

import (
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/httpapi"
)

// externalStatus is the MQTT part of the status with an external broker
// at url.
func externalStatus(url string, c gateway.BrokerConnection) httpapi.MQTTStatus {
	st := httpapi.MQTTStatus{Mode: "external", Address: url, Connected: c.Connected, LastError: c.LastError, FailedAttempts: c.FailedAttempts}
	if !c.LastErrorAt.IsZero() {
		at := c.LastErrorAt
		st.LastErrorAt = &at
	}
	return st
}
