package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

func TestExplainConnectError(t *testing.T) {
	network := func(err error) error { return fmt.Errorf("%w : %w", packets.ErrorNetworkError, err) }
	tests := []struct {
		err  error
		want string
	}{
		{packets.ErrorRefusedNotAuthorised, "not authorised: the broker refused cairn's credentials, CONNACK return code 5 (Connection Refused: Not Authorised)"},
		{packets.ErrorRefusedBadUsernameOrPassword, "not authorised: the broker refused cairn's credentials, CONNACK return code 4"},
		{packets.ErrorRefusedIDRejected, "CONNACK return code 2"},
		{network(&net.OpError{Op: "dial", Net: "tcp", Err: &osSyscallError{syscall.ECONNREFUSED}}), "connection refused"},
		{network(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "brokr.lan", IsNotFound: true}}), "DNS: lookup brokr.lan: no such host"},
		{network(errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")), "tls: failed to verify"},
		{nil, "no reason given"},
	}
	for _, tt := range tests {
		if got := explainConnectError(tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("explainConnectError(%v) = %q, want %q in it", tt.err, got, tt.want)
		}
	}
}

// osSyscallError is an error that unwraps to an errno, as a dial's does.
type osSyscallError struct{ errno syscall.Errno }

func (e *osSyscallError) Error() string { return "connect: " + e.errno.Error() }
func (e *osSyscallError) Unwrap() error { return e.errno }

// TestConnState_LogBacksOff: the same reason is logged at once, then after
// 30 s, 60 s more, 120 s more…, never more often than 30 minutes once
// there; a new reason at once; a connection clears the error.
func TestConnState_LogBacksOff(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &connState{url: "tcp://x", log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &osSyscallError{syscall.ECONNREFUSED}}
	var loggedAt []time.Duration
	start := now
	for range 4 * 3600 / 2 { // four hours of attempts every 2 s
		n := strings.Count(buf.String(), "\n")
		c.failed(refused)
		if strings.Count(buf.String(), "\n") > n {
			loggedAt = append(loggedAt, now.Sub(start))
		}
		now = now.Add(2 * time.Second)
	}
	want := []time.Duration{0, 30 * time.Second, 90 * time.Second, 210 * time.Second, 450 * time.Second, 930 * time.Second, 1890 * time.Second, 3690 * time.Second}
	for i, w := range want {
		if i >= len(loggedAt) || loggedAt[i] != w {
			t.Fatalf("logged at %v, want it to begin %v", loggedAt, want)
		}
	}
	for i := len(want); i < len(loggedAt); i++ {
		if d := loggedAt[i] - loggedAt[i-1]; d != 30*time.Minute {
			t.Errorf("logged at %v: %v apart, want 30m once backed off", loggedAt[i], d)
		}
	}
	n := strings.Count(buf.String(), "\n")
	c.failed(packets.ErrorRefusedNotAuthorised)
	if strings.Count(buf.String(), "\n") != n+1 {
		t.Errorf("a new reason was not logged at once")
	}
	if got := c.get(); got.FailedAttempts != 4*3600/2+1 || !strings.Contains(got.LastError, "not authorised") {
		t.Errorf("state %+v", got)
	}
	if failed, _ := c.connected(); failed != 4*3600/2+1 {
		t.Errorf("connected after %d failed attempts, want %d", failed, 4*3600/2+1)
	}
	if got := c.get(); got.LastError != "" || got.FailedAttempts != 0 {
		t.Errorf("after connecting: %+v", got)
	}
}
