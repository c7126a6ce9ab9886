package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

// BrokerConnection is how the subscriber's connection to the external
// broker is doing.
type BrokerConnection struct {
	// Connected reports whether it is connected and subscribed.
	Connected bool
	// LastError says why the last attempt to connect failed, or why the
	// last connection was lost, in words (explainConnectError); empty
	// once connected again. LastErrorAt is when.
	LastError   string
	LastErrorAt time.Time
	// FailedAttempts counts the attempts that failed since the last
	// connection.
	FailedAttempts int
}

// Logging of failed attempts backs off while the reason stays the same:
// the first is logged at once, the next after firstRepeat, then at
// doubling intervals up to maxRepeat. A new reason is logged at once.
const (
	firstRepeat = 30 * time.Second
	maxRepeat   = 30 * time.Minute
)

// connState keeps the subscriber's BrokerConnection and decides which
// failures to log. It is safe for concurrent use: paho reports from
// goroutines of its own.
type connState struct {
	url string
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex // guards the fields below
	conn    BrokerConnection
	failing time.Time     // when the current run of failures began
	logged  string        // the reason last logged
	next    time.Time     // when the same reason is logged again
	every   time.Duration // the interval after next
}

// failed records a failed attempt to connect, and logs it unless the same
// reason was logged a moment ago.
func (c *connState) failed(err error) {
	reason := explainConnectError(err)
	now := c.now()
	c.mu.Lock()
	if c.conn.FailedAttempts == 0 {
		c.failing = now
	}
	c.conn.FailedAttempts++
	c.conn.LastError, c.conn.LastErrorAt = reason, now
	n, since := c.conn.FailedAttempts, c.failing
	log := reason != c.logged || !now.Before(c.next)
	if reason != c.logged {
		c.logged, c.every = reason, firstRepeat
	}
	again := c.every
	if log {
		c.next = now.Add(again)
		c.every = min(2*again, maxRepeat)
	}
	c.mu.Unlock()
	if log {
		c.log.Warn("cannot connect to mqtt broker; retrying", "url", c.url, "reason", reason,
			"failed_attempts", n, "since", since.Format(time.RFC3339), "same_reason_logged_again_in", again, "err", err)
	}
}

// broke records why a connection ended or could not be used.
func (c *connState) broke(reason string) {
	c.mu.Lock()
	c.conn.LastError, c.conn.LastErrorAt = reason, c.now()
	c.mu.Unlock()
}

// connected records a connection, clearing the error, and returns the
// attempts that failed before it and since when.
func (c *connState) connected() (failed int, since time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	failed, since = c.conn.FailedAttempts, c.failing
	c.conn = BrokerConnection{}
	c.logged = ""
	return failed, since
}

func (c *connState) get() BrokerConnection {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// explainConnectError says in a few words why connecting to the broker
// failed: the broker's refusal with its CONNACK return code, connection
// refused, a name that does not resolve, TLS, or a timeout.
func explainConnectError(err error) string {
	if err == nil {
		return "no reason given"
	}
	for code, e := range packets.ConnErrors {
		if e == nil || code == packets.ErrNetworkError || !errors.Is(err, e) {
			continue
		}
		what := packets.ConnackReturnCodes[code]
		switch code {
		case packets.ErrRefusedBadUsernameOrPassword, packets.ErrRefusedNotAuthorised:
			return fmt.Sprintf("not authorised: the broker refused cairn's credentials, CONNACK return code %d (%s): check mqtt.username, mqtt.password_file and the broker's users and ACL", code, what)
		case packets.ErrRefusedIDRejected:
			return fmt.Sprintf("refused: CONNACK return code %d (%s): check mqtt.client_id", code, what)
		}
		return fmt.Sprintf("refused: CONNACK return code %d (%s)", code, what)
	}
	var dns *net.DNSError
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	var record tls.RecordHeaderError
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		return "DNS: " + dns.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens there (is the broker running, on this port?)"
	case errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &host), errors.As(err, &alert), errors.As(err, &record):
		return "TLS: " + innermost(err)
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out: " + innermost(err)
	}
	return innermost(err)
}

// innermost is the message of err without paho's "network Error : "
// prefix.
func innermost(err error) string {
	return strings.TrimPrefix(err.Error(), packets.ErrorNetworkError.Error()+" : ")
}
