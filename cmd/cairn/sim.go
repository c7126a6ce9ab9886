package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	"github.com/cairn-gateway/cairn/third_party/paho/packets"
)

// simSummary is what `cairn sim` prints when it is done, as one JSON line.
type simSummary struct {
	Sent     int64   `json:"sent"`
	Acked    int64   `json:"acked"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"msgs_per_sec"`
	Readings int64   `json:"readings"`
	// AckP50MS and AckP99MS are the median and 99th percentile of the
	// time from PUBLISH to PUBACK, in milliseconds (QoS 1 only).
	AckP50MS float64 `json:"ack_p50_ms,omitempty"`
	AckP99MS float64 `json:"ack_p99_ms,omitempty"`
}

// simOptions are the flags of `cairn sim`.
type simOptions struct {
	broker, config          string
	username                string
	password, passwordFile  string
	caFile, certFile, keyFn string
	devices                 int
	rate                    float64
	count                   int64
	duration, progress      time.Duration
	qos, inflight           int
	topic, clientID         string
}

// connectError is the error of a connection refused. An anonymous one
// refused as not authorised says how to give a user: cairn's broker lets
// clients without one in only on a loopback listener.
func (o *simOptions) connectError(server string, err error) error {
	notAuthorised := errors.Is(err, packets.ErrorRefusedNotAuthorised) || errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword)
	if notAuthorised && o.username == "" {
		return fmt.Errorf("sim: connect %s: %w (the broker wants a user: give -username and -password-file; cairn's lets clients without one in only on a loopback listener)", server, err)
	}
	return fmt.Errorf("sim: connect %s: %w", server, err)
}

// lostError is the error of a connection the broker closed. A user
// simulating several devices publishes as USER-0000, …, which cairn's
// broker refuses by closing the connection unless an ACL line lets the
// user write them: the error says so.
func (o *simOptions) lostError(err error) error {
	if o.username != "" && o.devices > 1 {
		return fmt.Errorf("sim: connection lost: %w (with -username and -devices %d the devices are %s, …; a broker that lets a user publish only as itself, as cairn's does without an ACL line, closes the connection: use -devices 1, or open them in mqtt.embedded.acl_file, docs/security.md)", err, o.devices, o.deviceName(0))
	}
	return fmt.Errorf("sim: connection lost: %w", err)
}

// runSim publishes simulated sensor readings: each of N devices sends JSON
// messages with a millisecond "ts" and two numeric fields, round robin, at a
// total rate (0: as fast as the broker acknowledges). It writes progress
// and a summary for people to stderr, and the summary as one JSON line to
// stdout.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSimFlags(args, stderr)
	if err != nil {
		return err
	}
	copts, err := o.clientOptions()
	if err != nil {
		return err
	}
	lost := make(chan error, 1)
	copts.SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
	c := paho.NewClient(copts)
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		return o.connectError(copts.Servers[0].String(), tok.Error())
	}
	defer c.Disconnect(250)
	fmt.Fprintf(stderr, "sim: connected to %s as %s; %s at %s, QoS %d\n", copts.Servers[0], o.who(),
		quantity(int64(o.devices), "device", "devices"), o.rateText(), o.qos)

	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	s := newSimRun(o)
	err = s.publish(ctx, c, lost, stderr)
	sum := s.finish()
	fmt.Fprintf(stderr, "sim: done in %.1fs: %d published, %d acknowledged (%d readings), %.0f acknowledged/s",
		sum.Seconds, sum.Sent, sum.Acked, sum.Readings, sum.PerSec)
	if sum.AckP50MS > 0 {
		fmt.Fprintf(stderr, ", PUBACK after %.2f ms (median), %.2f ms (99th percentile)", sum.AckP50MS, sum.AckP99MS)
	}
	if f := s.failed.Load(); f > 0 {
		fmt.Fprintf(stderr, ", %d failed (first: %v)", f, s.firstErr())
	}
	fmt.Fprintln(stderr)
	if jerr := json.NewEncoder(stdout).Encode(sum); jerr != nil {
		return jerr
	}
	return err
}

// parseSimFlags parses and checks the flags of `cairn sim`.
func parseSimFlags(args []string, stderr io.Writer) (*simOptions, error) {
	var o simOptions
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.broker, "broker", "", "broker `url`: tcp://host:port, or ssl://host:port for TLS (default tcp://127.0.0.1:1883, or the -config file's broker)")
	fs.StringVar(&o.config, "config", "", "take the broker's address and TLS from this cairn configuration `file`")
	fs.StringVar(&o.username, "username", "", "MQTT user `name`; with it the device is named like the user (USER-0000, … for more than one device, which cairn's broker refuses without an ACL line)")
	fs.StringVar(&o.passwordFile, "password-file", "", "read the MQTT password from this `file` (mode 0600)")
	fs.StringVar(&o.password, "password", "", "MQTT `password` (other users of the machine can see it: prefer -password-file)")
	fs.StringVar(&o.caFile, "cafile", "", "PEM `file` of the CA that signs the broker's certificate (default: the system's roots)")
	fs.StringVar(&o.certFile, "cert", "", "client certificate `file` (PEM), with -key")
	fs.StringVar(&o.keyFn, "key", "", "client key `file` (PEM, mode 0600), with -cert")
	fs.IntVar(&o.devices, "devices", 10, "number of simulated devices (1 with -username)")
	fs.Float64Var(&o.rate, "rate", 10, "messages per second in total; 0 for as fast as possible")
	fs.Int64Var(&o.count, "count", 0, "stop after this many messages (0: no limit)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: no limit)")
	fs.DurationVar(&o.progress, "progress", 10*time.Second, "print progress to stderr this often (0: never)")
	fs.IntVar(&o.qos, "qos", 1, "MQTT QoS (0 or 1)")
	fs.IntVar(&o.inflight, "inflight", 100, "QoS 1 messages in flight at most")
	fs.StringVar(&o.topic, "topic", "sensors/{device}/telemetry", "topic `pattern`; {device} is replaced")
	fs.StringVar(&o.clientID, "client-id", "cairn-sim", "MQTT client id")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	devicesSet := false
	fs.Visit(func(f *flag.Flag) { devicesSet = devicesSet || f.Name == "devices" })
	if o.username != "" && !devicesSet {
		o.devices = 1
	}
	switch {
	case o.devices < 1 || o.rate < 0 || o.qos < 0 || o.qos > 1 || o.inflight < 1 || o.progress < 0:
		return nil, errors.New("sim: need -devices ≥ 1, -rate ≥ 0, -qos 0 or 1, -inflight ≥ 1, -progress ≥ 0")
	case o.count == 0 && o.duration == 0 && o.rate == 0:
		return nil, errors.New("sim: with -rate 0 set -count or -duration")
	case o.password != "" && o.passwordFile != "":
		return nil, errors.New("sim: -password and -password-file: give one")
	case (o.password != "" || o.passwordFile != "") && o.username == "":
		return nil, errors.New("sim: a password needs -username")
	case (o.certFile == "") != (o.keyFn == ""):
		return nil, errors.New("sim: -cert and -key go together")
	}
	return &o, nil
}

// who names the user the simulation connects as, for its first line.
func (o *simOptions) who() string {
	if o.username == "" {
		return "an anonymous client"
	}
	return "user " + o.username
}

// rateText is the rate asked for, for people.
func (o *simOptions) rateText() string {
	if o.rate == 0 {
		return "full speed"
	}
	return strconv.FormatFloat(o.rate, 'f', -1, 64) + " messages/s"
}

// deviceName is the name of simulated device i: sim-0000, …; with a
// user name, the user's name (one device) or USER-0000, ….
func (o *simOptions) deviceName(i int) string {
	switch {
	case o.username == "":
		return fmt.Sprintf("sim-%04d", i)
	case o.devices == 1:
		return o.username
	}
	return fmt.Sprintf("%s-%04d", o.username, i)
}

// clientOptions are paho's options for o: the broker and TLS from the
// configuration file, if given, then the flags, which win.
func (o *simOptions) clientOptions() (*paho.ClientOptions, error) {
	broker := "tcp://127.0.0.1:1883"
	var tc *tls.Config
	if o.config != "" {
		var err error
		if broker, tc, err = simBrokerFromConfig(o.config); err != nil {
			return nil, err
		}
	}
	if o.broker != "" {
		broker = o.broker
	}
	secure := strings.HasPrefix(broker, "ssl://") || strings.HasPrefix(broker, "tls://") || strings.HasPrefix(broker, "mqtts://")
	if o.caFile != "" || o.certFile != "" {
		if !secure {
			return nil, fmt.Errorf("sim: -cafile, -cert and -key are for TLS: the broker URL %s needs ssl://", broker)
		}
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c, err := TLSConfig{CAFile: o.caFile, CertFile: o.certFile, KeyFile: o.keyFn}.clientConfig()
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		if c.RootCAs != nil {
			tc.RootCAs = c.RootCAs
		}
		tc.Certificates = c.Certificates
	}
	opts := paho.NewClientOptions().AddBroker(broker).SetClientID(o.clientID).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(10 * time.Second).
		SetWriteTimeout(10 * time.Second)
	if secure && tc != nil {
		opts.SetTLSConfig(tc)
	}
	if o.username != "" {
		password := o.password
		if o.passwordFile != "" {
			b, err := readSecret(o.passwordFile)
			if err != nil {
				return nil, fmt.Errorf("sim: -password-file: %w", err)
			}
			password = string(b)
		}
		opts.SetUsername(o.username).SetPassword(password)
	}
	return opts, nil
}

// simRun is one run of the simulation: its counters, and the times from
// PUBLISH to PUBACK.
type simRun struct {
	o       *simOptions
	start   time.Time
	sent    atomic.Int64
	acked   atomic.Int64
	failed  atomic.Int64
	tokens  chan simSent
	drained chan struct{} // closed when every token is settled
	mu      sync.Mutex    // guards firstFailure
	// firstFailure is the error of the first message not acknowledged.
	firstFailure error
	waits        []time.Duration // publish to PUBACK; read after drained
}

// simSent is a message published and its time.
type simSent struct {
	tok paho.Token
	at  time.Time
}

// newSimRun starts counting the acknowledgements of a run. PUBACKs come
// in the order of the PUBLISHes, so waiting for the tokens in order
// times each acknowledgement.
func newSimRun(o *simOptions) *simRun {
	s := &simRun{o: o, start: time.Now(), tokens: make(chan simSent, o.inflight), drained: make(chan struct{})}
	go func() {
		defer close(s.drained)
		for m := range s.tokens {
			m.tok.Wait()
			if err := m.tok.Error(); err != nil {
				if s.failed.Add(1) == 1 {
					s.mu.Lock()
					s.firstFailure = err
					s.mu.Unlock()
				}
				continue
			}
			s.acked.Add(1)
			s.waits = append(s.waits, time.Since(m.at))
		}
	}()
	return s
}

func (s *simRun) firstErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstFailure
}

// publish publishes until the count is reached, ctx ends or the
// connection is lost (an error), printing progress to w.
func (s *simRun) publish(ctx context.Context, c paho.Client, lost <-chan error, w io.Writer) error {
	o := s.o
	type sensor struct {
		topic     string
		temp, hum float64
		lastMS    int64
	}
	sensors := make([]sensor, o.devices)
	for i := range sensors {
		sensors[i] = sensor{topic: strings.ReplaceAll(o.topic, "{device}", o.deviceName(i)), temp: 20 + rand.Float64()*5, hum: 40 + rand.Float64()*20}
	}
	var progress <-chan time.Time
	if o.progress > 0 {
		tick := time.NewTicker(o.progress)
		defer tick.Stop()
		progress = tick.C
	}
	interval := time.Duration(0)
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) / o.rate)
	}
	pace := time.NewTimer(0)
	defer pace.Stop()
	next, last, lastAcked := s.start, s.start, int64(0)
	var buf []byte
	for n := int64(0); o.count == 0 || n < o.count; n++ {
		if interval > 0 {
			next = next.Add(interval)
			pace.Reset(time.Until(next))
		}
		for waiting := interval > 0; waiting; {
			select {
			case <-pace.C:
				waiting = false
			case now := <-progress:
				lastAcked, last = s.report(w, now, last, lastAcked), now
			case err := <-lost:
				return o.lostError(err)
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case now := <-progress:
			lastAcked, last = s.report(w, now, last, lastAcked), now
		case err := <-lost:
			return o.lostError(err)
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		sn := &sensors[n%int64(len(sensors))]
		// Strictly increasing timestamps per device: at high rates several
		// messages share a millisecond, and equal readings are one reading.
		ms := max(time.Now().UnixMilli(), sn.lastMS+1)
		sn.lastMS = ms
		sn.temp = walk(sn.temp, 0.05)
		sn.hum = walk(sn.hum, 0.1)
		buf = append(buf[:0], `{"ts":`...)
		buf = strconv.AppendInt(buf, ms, 10)
		buf = append(buf, `,"temperature":`...)
		buf = strconv.AppendFloat(buf, sn.temp, 'f', 2, 64)
		buf = append(buf, `,"humidity":`...)
		buf = strconv.AppendFloat(buf, sn.hum, 'f', 2, 64)
		buf = append(buf, '}')
		at := time.Now()
		tok := c.Publish(sn.topic, byte(o.qos), false, append([]byte(nil), buf...))
		s.sent.Add(1)
		s.tokens <- simSent{tok, at}
	}
	return nil
}

// report prints one line of progress at now: the counts so far, and the
// rate of acknowledgements since the line before (at last, acked then).
// It returns the count of acknowledged messages.
func (s *simRun) report(w io.Writer, now, last time.Time, lastAcked int64) int64 {
	acked := s.acked.Load()
	rate := float64(acked-lastAcked) / now.Sub(last).Seconds()
	elapsed := now.Sub(s.start).Round(min(s.o.progress, time.Second))
	fmt.Fprintf(w, "sim: %s: %d published, %d acknowledged, %.0f acknowledged/s", elapsed, s.sent.Load(), acked, rate)
	if f := s.failed.Load(); f > 0 {
		fmt.Fprintf(w, ", %d failed", f)
	}
	fmt.Fprintln(w)
	return acked
}

// finish waits for every message to be settled and sums the run up.
func (s *simRun) finish() simSummary {
	close(s.tokens)
	<-s.drained
	el := time.Since(s.start).Seconds()
	n := s.acked.Load()
	sum := simSummary{Sent: s.sent.Load(), Acked: n, Seconds: math.Round(el*1000) / 1000, Readings: 2 * n}
	if el > 0 {
		sum.PerSec = math.Round(float64(n) / el)
	}
	if s.o.qos == 1 && len(s.waits) > 0 {
		slices.Sort(s.waits)
		ms := func(q float64) float64 {
			return math.Round(float64(s.waits[int(q*float64(len(s.waits)-1))].Microseconds())) / 1000
		}
		sum.AckP50MS, sum.AckP99MS = ms(0.5), ms(0.99)
	}
	return sum
}

// walk moves v by a random step of at most ±step, rounded to 2 decimals.
func walk(v, step float64) float64 {
	return math.Round((v+(rand.Float64()*2-1)*step)*100) / 100
}

// simBrokerFromConfig returns the broker URL and the TLS configuration
// that a sensor would use to reach the broker of the cairn configuration
// in path: the external broker's mqtt.url and the CA of its mqtt.tls; or
// the embedded broker's plain listener, else its TLS listener, trusting
// the broker's own certificate (mqtt.embedded.tls.cert_file, with any CA
// certificates it holds). An address on every interface is reached on
// 127.0.0.1. Relative paths are the configuration folder's, as for run;
// secret files the configuration names are not read.
func simBrokerFromConfig(path string) (string, *tls.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, fmt.Errorf("sim: %w", err)
	}
	defer f.Close()
	cfg, err := ParseConfig(f)
	if err != nil {
		return "", nil, fmt.Errorf("sim: %s: %w", path, err)
	}
	cfg.resolvePaths(configDir(path))
	e := cfg.MQTT.Embedded
	if e == nil {
		tc, err := TLSConfig{CAFile: cfg.MQTT.TLS.CAFile, ServerName: cfg.MQTT.TLS.ServerName}.clientConfig()
		if err != nil {
			return "", nil, fmt.Errorf("sim: %s: mqtt.tls: %w", path, err)
		}
		return cfg.MQTT.URL, tc, nil
	}
	scheme, addr, key := "tcp://", e.Listen, "mqtt.embedded.listen"
	var tc *tls.Config
	if addr == "" {
		scheme, addr, key = "ssl://", e.TLSListen, "mqtt.embedded.tls_listen"
		pool, err := loadCAs(e.TLS.CertFile)
		if err != nil {
			return "", nil, fmt.Errorf("sim: %s: mqtt.embedded.tls.cert_file: %w", path, err)
		}
		tc = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("sim: %s: %s: %w", path, key, err)
	}
	if port == "0" {
		return "", nil, fmt.Errorf("sim: %s: %s %s: the port is picked at each start; give -broker", path, key, addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + net.JoinHostPort(host, port), tc, nil
}
