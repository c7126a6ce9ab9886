package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cairn-gateway/cairn/gateway"
)

// EmbeddedConfig is the mqtt.embedded: section.
type EmbeddedConfig struct {
	Listen    string          `yaml:"listen"`     // "" for no plain listener
	TLSListen string          `yaml:"tls_listen"` // "" for no TLS listener
	TLS       ServerTLSConfig `yaml:"tls"`
	// PasswordFile holds user:bcrypt-hash lines (cairn passwd).
	PasswordFile string `yaml:"password_file"`
	// ACLFile grants more than the default rules.
	ACLFile string `yaml:"acl_file"`
	// AllowAnonymous lets clients in without a user name on every listener;
	// unset, on loopback listeners only.
	AllowAnonymous *bool        `yaml:"allow_anonymous"`
	Limits         BrokerLimits `yaml:"limits"`
}

// BrokerLimits is the mqtt.embedded.limits: section.
type BrokerLimits struct {
	MaxPacketSize int     `yaml:"max_packet_size"` // bytes
	MaxClients    int     `yaml:"max_clients"`
	MaxInflight   int     `yaml:"max_inflight"`
	WriteBuffer   int     `yaml:"write_buffer"`
	MessageRate   float64 `yaml:"message_rate"` // per client and second; 0: no limit
}

// ServerTLSConfig is the mqtt.embedded.tls: section: the broker's
// certificate and, optionally, the CA that signs its clients' certificates.
type ServerTLSConfig struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// HTTPConfig is the http: section.
type HTTPConfig struct {
	Listen string `yaml:"listen"`
	// TokenFile holds a bearer token that every request but /healthz must
	// carry; "" for none.
	TokenFile string `yaml:"token_file"`
	// AllowedHosts are the host names clients may reach the API by
	// besides the loopback ones (checkHTTPOpen).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowAnonymous lets http.listen off loopback go without a token.
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// QueryRate caps the query requests per second; 0 for no limit.
	QueryRate float64 `yaml:"query_rate"`
	// MetricsReadings puts the newest reading of each series on /metrics
	// (cairn_reading), no more of them than store.max_series.
	MetricsReadings bool `yaml:"metrics_readings"`
}

// maxMetricsReadings bounds store.max_series with http.metrics_readings:
// a scrape reads the newest reading of every series from the store, and
// a page of more gauges than this is no longer a scrape.
const maxMetricsReadings = 100_000

func defaultEmbedded() *EmbeddedConfig {
	return &EmbeddedConfig{
		Listen: defaultEmbeddedListen,
		Limits: BrokerLimits{
			MaxPacketSize: 128 << 10,
			MaxClients:    1000,
			MaxInflight:   65535,
			WriteBuffer:   1024,
			MessageRate:   1000,
		},
	}
}

// validateEmbedded checks the mqtt.embedded section; bad reports a problem.
func (c *Config) validateEmbedded(bad func(key, format string, a ...any)) {
	e := c.MQTT.Embedded
	if e.Listen == "" && e.TLSListen == "" {
		bad("mqtt.embedded.listen", "must be set when mqtt.embedded.tls_listen is not")
	}
	if e.Listen != "" {
		if err := checkHostPort(e.Listen); err != nil {
			bad("mqtt.embedded.listen", "%v", err)
		}
	}
	t := e.TLS
	if e.TLSListen != "" {
		if err := checkHostPort(e.TLSListen); err != nil {
			bad("mqtt.embedded.tls_listen", "%v", err)
		}
		if t.CertFile == "" || t.KeyFile == "" {
			bad("mqtt.embedded.tls", "cert_file and key_file are needed for mqtt.embedded.tls_listen")
		}
	} else if t != (ServerTLSConfig{}) {
		bad("mqtt.embedded.tls", "set, but mqtt.embedded.tls_listen is not")
	}
	anon := e.AllowAnonymous != nil && *e.AllowAnonymous
	for _, l := range []struct{ key, addr string }{{"listen", e.Listen}, {"tls_listen", e.TLSListen}} {
		if l.addr == "" || gateway.IsLoopback(l.addr) || anon || e.PasswordFile != "" {
			continue
		}
		if l.key == "tls_listen" && t.ClientCAFile != "" {
			continue
		}
		bad("mqtt.embedded."+l.key, "%s is not loopback, where anonymous clients are refused, and no one could log in: set mqtt.embedded.password_file (see cairn passwd), or allow_anonymous: true to let anyone in", l.addr)
	}
	lim := e.Limits
	if lim.MaxPacketSize < 1024 || lim.MaxPacketSize > 256<<20 {
		bad("mqtt.embedded.limits.max_packet_size", "must be from 1024 bytes to 256 MiB (got %d)", lim.MaxPacketSize)
	} else if lim.MaxPacketSize < int(c.MQTT.MaxPayload) {
		bad("mqtt.embedded.limits.max_packet_size", "must be at least mqtt.max_payload, %d (got %d)", int64(c.MQTT.MaxPayload), lim.MaxPacketSize)
	}
	if lim.MaxClients < 1 || lim.MaxClients > 1000000 {
		bad("mqtt.embedded.limits.max_clients", "must be from 1 to 1000000 (got %d)", lim.MaxClients)
	}
	if lim.MaxInflight < 1 || lim.MaxInflight > 65535 {
		bad("mqtt.embedded.limits.max_inflight", "must be from 1 to 65535 (got %d)", lim.MaxInflight)
	}
	if lim.WriteBuffer < 16 || lim.WriteBuffer > 65535 {
		bad("mqtt.embedded.limits.write_buffer", "must be from 16 to 65535 (got %d)", lim.WriteBuffer)
	}
	if lim.MessageRate < 0 {
		bad("mqtt.embedded.limits.message_rate", "must be 0 (no limit) or more (got %g)", lim.MessageRate)
	}
}

// validateSecurity checks the keys of the external broker's login and TLS
// and of the HTTP API; bad reports a problem.
func (c *Config) validateSecurity(bad func(key, format string, a ...any)) {
	m := c.MQTT
	if m.URL != "" {
		scheme, _, _ := strings.Cut(m.URL, "://")
		secure := scheme == "ssl" || scheme == "tls" || scheme == "mqtts"
		if err := m.TLS.validate("mqtt.tls"); err != nil {
			bad("mqtt.tls", "%v", strings.TrimPrefix(err.Error(), "mqtt.tls: "))
		}
		if !secure && m.TLS != (TLSConfig{}) {
			bad("mqtt.tls", "set, but mqtt.url %q is not ssl://, tls:// or mqtts://", m.URL)
		}
		if (m.Username == "") != (m.PasswordFile == "") {
			bad("mqtt.username", "mqtt.username and mqtt.password_file go together")
		}
	} else if m.Username != "" || m.PasswordFile != "" || m.TLS != (TLSConfig{}) {
		bad("mqtt", "username, password_file and tls are for an external broker (mqtt.url)")
	}
	c.validateHTTPAccess(bad)
	if c.HTTP.QueryRate < 0 {
		bad("http.query_rate", "must be 0 (no limit) or more (got %g)", c.HTTP.QueryRate)
	}
	if c.HTTP.MetricsReadings && c.Store.MaxSeries > maxMetricsReadings {
		bad("http.metrics_readings", "takes store.max_series of at most %d, the gauges of a scrape (got %d)", maxMetricsReadings, c.Store.MaxSeries)
	}
}

// serverConfig loads the broker's certificate, and the client CA if set,
// into a TLS 1.2+ server configuration. With a client CA, clients must
// present a certificate that it signed.
func (t ServerTLSConfig) serverConfig() (*tls.Config, error) {
	if _, err := readSecret(t.KeyFile); err != nil { // the key is a secret: same checks
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, secretPath(t.KeyFile))
	if err != nil {
		return nil, keyPairError(t.CertFile, secretPath(t.KeyFile), err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCAFile != "" {
		pool, err := loadCAs(t.ClientCAFile)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// secretFiles are what the files named by the security keys hold; zero
// when none is named.
type secretFiles struct {
	passwords    *gateway.Passwords // mqtt.embedded.password_file
	acl          *gateway.ACL       // mqtt.embedded.acl_file
	brokerTLS    *tls.Config        // mqtt.embedded.tls, with tls_listen
	mqttPassword string             // mqtt.password_file
	mqttTLS      *tls.Config        // mqtt.tls, with an ssl:// url
	httpToken    []byte             // http.token_file
}

// loadSecurityFiles reads the password, ACL, certificate and token files
// that the configuration names into c.secrets. Its errors name the key.
func (c *Config) loadSecurityFiles() error {
	var errs []error
	fail := func(key string, err error) { errs = append(errs, fmt.Errorf("%s: %w", key, err)) }
	sf := &c.secrets
	if e := c.MQTT.Embedded; e != nil {
		if e.PasswordFile != "" {
			if data, err := readSecret(e.PasswordFile); err != nil {
				fail("mqtt.embedded.password_file", err)
			} else if sf.passwords, err = gateway.ParsePasswords(data); err != nil {
				fail("mqtt.embedded.password_file", fmt.Errorf("%s: %w", secretPath(e.PasswordFile), err))
			}
		}
		if e.ACLFile != "" {
			if data, err := os.ReadFile(e.ACLFile); err != nil {
				fail("mqtt.embedded.acl_file", err)
			} else if sf.acl, err = gateway.ParseACL(data); err != nil {
				fail("mqtt.embedded.acl_file", fmt.Errorf("%s: %w", e.ACLFile, err))
			}
		}
		if e.TLSListen != "" {
			var err error
			if sf.brokerTLS, err = e.TLS.serverConfig(); err != nil {
				fail("mqtt.embedded.tls", err)
			}
		}
	}
	m := c.MQTT
	if m.URL != "" && m.PasswordFile != "" {
		if p, err := readSecret(m.PasswordFile); err != nil {
			fail("mqtt.password_file", err)
		} else {
			sf.mqttPassword = string(p)
		}
	}
	if scheme, _, _ := strings.Cut(m.URL, "://"); scheme == "ssl" || scheme == "tls" || scheme == "mqtts" {
		var err error
		if sf.mqttTLS, err = m.TLS.clientConfig(); err != nil {
			fail("mqtt.tls", err)
		}
	}
	if c.HTTP.TokenFile != "" {
		var err error
		if sf.httpToken, err = readSecret(c.HTTP.TokenFile); err != nil {
			fail("http.token_file", err)
		} else if err := checkHTTPToken(c.HTTP.TokenFile, sf.httpToken); err != nil {
			fail("http.token_file", err)
		}
	}
	return errors.Join(errs...)
}

// brokerSecurity is the embedded broker's security: the files' contents
// and the limits.
func (c *Config) brokerSecurity() gateway.BrokerSecurity {
	e := c.MQTT.Embedded
	return gateway.BrokerSecurity{
		Passwords:      c.secrets.passwords,
		ACL:            c.secrets.acl,
		Routes:         c.routes,
		AllowAnonymous: e.AllowAnonymous,
		MaxPacketSize:  uint32(e.Limits.MaxPacketSize),
		MaxClients:     e.Limits.MaxClients,
		MaxInflight:    uint16(e.Limits.MaxInflight),
		WriteBuffer:    e.Limits.WriteBuffer,
		MessageRate:    e.Limits.MessageRate,
	}
}

// anonymousBeyondLoopback reports whether clients without a user name may
// connect from other hosts: allow_anonymous is true and a listener is not
// on loopback.
func anonymousBeyondLoopback(e *EmbeddedConfig) bool {
	if e.AllowAnonymous == nil || !*e.AllowAnonymous {
		return false
	}
	return (e.Listen != "" && !gateway.IsLoopback(e.Listen)) || (e.TLSListen != "" && !gateway.IsLoopback(e.TLSListen))
}
