package uplink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/packets"
	paho5 "github.com/eclipse/paho.golang/paho"
)

// MQTT 5 (MQTTOptions.Version 5) gives the broker a reason code in every
// PUBACK: one of 0x80 or more refuses the message, and the broker says
// why (0x87 not authorized: an ACL or a policy forbids the topic). Such a
// message is set aside (parkRefused) so that the batch's other messages,
// on other topics, still go, and is tried again with a backoff of its own
// (retryParked) until the broker takes it. A refusal for the session or
// the rate (0x91 packet identifier in use, 0x97 quota exceeded) is not
// the message's: the batch is tried again, after a backoff, on a new
// connection. The broker's DISCONNECT and a refused CONNACK carry reason
// codes too, and the status and the log say them.

// MQTT protocol versions of MQTTOptions.Version.
const (
	MQTT311 = 4 // MQTT 3.1.1, paho.mqtt.golang
	MQTT5   = 5 // MQTT 5, paho.golang
)

// sessionExpiry is how long an MQTT 5 broker keeps the session of a
// disconnected upstream: its client id's in-flight messages.
const sessionExpiry = 24 * time.Hour

// pubToken is a publish in flight: Done is closed when its PUBACK came
// (Error nil), or it failed.
type pubToken interface {
	Done() <-chan struct{}
	Error() error
}

// v5Token is the pubToken of an MQTT 5 publish.
type v5Token struct {
	done chan struct{}
	err  error
}

func (t *v5Token) Done() <-chan struct{} { return t.done }
func (t *v5Token) Error() error          { return t.err }

// A Refusal is a PUBACK of MQTT 5 with a reason code of 0x80 or more:
// the broker will not take the message.
type Refusal struct {
	Code   byte
	Reason string // the broker's reason string, if it sent one
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("refused: %s (reason code 0x%02x)", reasonName(r.Code), r.Code)
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// messages reports whether the refusal is the message's own (it is set
// aside and the batch goes on), not the session's or the rate's (the
// batch is tried again).
func (r *Refusal) messages() bool { return r.Code != 0x91 && r.Code != 0x97 }

// reasonName is the name the MQTT 5 specification gives a reason code of
// 0x80 or more (CONNACK, PUBACK, DISCONNECT).
func reasonName(code byte) string {
	names := map[byte]string{
		0x80: "unspecified error", 0x81: "malformed packet", 0x82: "protocol error",
		0x83: "implementation specific error", 0x84: "unsupported protocol version",
		0x85: "client identifier not valid", 0x86: "bad user name or password",
		0x87: "not authorized", 0x88: "server unavailable", 0x89: "server busy",
		0x8a: "banned", 0x8b: "server shutting down", 0x8c: "bad authentication method",
		0x8d: "keep alive timeout", 0x8e: "session taken over", 0x8f: "topic filter invalid",
		0x90: "topic name invalid", 0x91: "packet identifier in use", 0x93: "receive maximum exceeded",
		0x94: "topic alias invalid", 0x95: "packet too large", 0x96: "message rate too high",
		0x97: "quota exceeded", 0x98: "administrative action", 0x99: "payload format invalid",
		0x9a: "retain not supported", 0x9b: "QoS not supported", 0x9c: "use another server",
		0x9d: "server moved", 0x9f: "connection rate exceeded", 0xa0: "maximum connect time",
	}
	if n, ok := names[code]; ok {
		return n
	}
	return "reason unknown"
}

// dial5 opens the network connection to the broker of an MQTT 5
// upstream: TCP for mqtt://, TLS with opts.TLS for mqtts://.
func (u *Uplink) dial5(ctx context.Context) (net.Conn, error) {
	p, err := url.Parse(u.opts.URL)
	if err != nil {
		return nil, err
	}
	host := p.Host
	d := &net.Dialer{Timeout: u.opts.Timeout}
	switch p.Scheme {
	case "mqtt":
		if p.Port() == "" {
			host = net.JoinHostPort(p.Hostname(), "1883")
		}
		return d.DialContext(ctx, "tcp", host)
	case "mqtts":
		if p.Port() == "" {
			host = net.JoinHostPort(p.Hostname(), "8883")
		}
		td := &tls.Dialer{NetDialer: d, Config: u.opts.TLS}
		return td.DialContext(ctx, "tcp", host)
	}
	return nil, fmt.Errorf("MQTT 5 speaks mqtt:// or mqtts://, not %s://", p.Scheme)
}

// mqttConnect5 connects an MQTT 5 upstream: a persistent session
// (clean start off, kept sessionExpiry), the options' client id,
// keep-alive and credentials.
func (u *Uplink) mqttConnect5(ctx context.Context) (*mqttConn, error) {
	o := u.opts
	nc, err := u.dial5(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(o.URL), err)
	}
	conn := &mqttConn{lost: make(chan struct{})}
	var once sync.Once
	lose := func(err error) { once.Do(func() { conn.why = err; close(conn.lost) }) }
	c := paho5.NewClient(paho5.ClientConfig{
		ClientID:      o.MQTT.ClientID,
		Conn:          packets.NewThreadSafeConn(nc),
		PacketTimeout: o.Timeout,
		OnServerDisconnect: func(d *paho5.Disconnect) {
			err := fmt.Errorf("the broker disconnected: %s (reason code 0x%02x)", reasonName(d.ReasonCode), d.ReasonCode)
			if d.Properties != nil && d.Properties.ReasonString != "" {
				err = fmt.Errorf("%w: %s", err, d.Properties.ReasonString)
			}
			lose(err)
		},
		OnClientError: lose,
		// cairn subscribes to nothing: what comes is taken and dropped.
		OnPublishReceived: []func(paho5.PublishReceived) (bool, error){
			func(paho5.PublishReceived) (bool, error) { return true, nil },
		},
	})
	expiry := uint32(sessionExpiry / time.Second)
	cp := &paho5.Connect{
		ClientID:   o.MQTT.ClientID,
		KeepAlive:  uint16(min(o.MQTT.KeepAlive/time.Second, 65535)),
		CleanStart: false,
		Properties: &paho5.ConnectProperties{SessionExpiryInterval: &expiry, RequestProblemInfo: true},
	}
	if o.Username != "" {
		cp.Username, cp.UsernameFlag = o.Username, true
		cp.Password, cp.PasswordFlag = []byte(o.Password), true
	}
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		if ca != nil && ca.ReasonCode >= 0x80 {
			err = fmt.Errorf("the broker refused the connection: %s (reason code 0x%02x)", reasonName(ca.ReasonCode), ca.ReasonCode)
			if ca.Properties != nil && ca.Properties.ReasonString != "" {
				err = fmt.Errorf("%w: %s", err, ca.Properties.ReasonString)
			}
		}
		return nil, fmt.Errorf("connect to %s: %w", redact(o.URL), err)
	}
	go func() {
		<-c.Done()
		lose(errors.New("connection closed"))
	}()
	conn.v5, conn.nc = c, nc
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		conn.maxPacket = int(*ca.Properties.MaximumPacketSize)
	}
	return conn, nil
}

// tooLarge returns a Refusal (0x95, packet too large) when a PUBLISH of
// payload bytes to topic is over the maximum packet size that an MQTT 5 broker
// announced: sent, it would have the broker close the connection.
func (c *mqttConn) tooLarge(topic string, payload int) *Refusal {
	// Fixed header (5), topic (2 + its bytes), packet id (2), properties
	// length (1).
	size := 5 + 2 + len(topic) + 2 + 1 + payload
	if c.maxPacket == 0 || size <= c.maxPacket {
		return nil
	}
	return &Refusal{Code: 0x95, Reason: fmt.Sprintf("%d bytes, over the broker's maximum packet size of %d: not sent (lower max_message_bytes)", size, c.maxPacket)}
}

// publish5 publishes a QoS 1 message on c, an MQTT 5 connection: the
// token is done when the PUBACK comes (a *Refusal when its reason code
// refuses the message), the connection fails, or ctx ends.
func publish5(ctx context.Context, c *paho5.Client, topic string, payload []byte, refused *Refusal) pubToken {
	t := &v5Token{done: make(chan struct{})}
	if refused != nil {
		t.err = refused
		close(t.done)
		return t
	}
	go func() {
		defer close(t.done)
		resp, err := c.Publish(ctx, &paho5.Publish{QoS: 1, Topic: topic, Payload: payload})
		if resp != nil && resp.ReasonCode >= 0x80 {
			r := &Refusal{Code: resp.ReasonCode}
			if resp.Properties != nil {
				r.Reason = resp.Properties.ReasonString
			}
			err = r
		}
		t.err = err
	}()
	return t
}
