package uplink

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

// An MQTT upstream with MQTTOptions.SAS logs in to Azure IoT Hub as its
// device: the user name and a SAS token made from the device key
// (sas.go), which paho asks for on every connection. IoT Hub closes a
// connection when its token expires; so once the token is due for
// renewal (RenewAt of its lifetime), the next batch, or the next message
// of the batch going, waits for the PUBACKs of what went on the old
// connection, and connects again with a new token. Nothing goes twice
// for it, and the connection is not lost under a batch. A connection
// left idle past its token's expiry is closed by the hub, and the next
// batch connects anew, with a new token.

// tokenDue reports whether the connection's SAS token is due for
// renewal.
func (u *Uplink) tokenDue() bool {
	sas := u.opts.MQTT.SAS
	return sas != nil && u.mq.conn != nil && sas.RenewIn() == 0
}

// renewingToken logs that the connection is closed to connect again
// with a new token: routine, not a failure.
func (u *Uplink) renewingToken() {
	sas := u.opts.MQTT.SAS
	u.log.Info("renewing the SAS token: connecting again with a new one", "device", sas.Device(),
		"old_token_expires", sas.Expiry().UTC().Format(time.RFC3339))
}

// sasRefused explains a refused login of a device that logs in with a
// SAS token; other errors, and those of other upstreams, it returns as
// they are.
func sasRefused(sas *SASRenewer, err error) error {
	if sas == nil || !(errors.Is(err, packets.ErrorRefusedNotAuthorised) || errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword)) {
		return err
	}
	return fmt.Errorf("%w: the hub refused the SAS token of device %s (a wrong device key or device id, or the gateway's clock off?)", err, sas.Device())
}
