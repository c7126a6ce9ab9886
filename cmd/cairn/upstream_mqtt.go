package main

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/uplink"
)

// MQTTUplinkConfig is the keys of an upstream of kind mqtt, beside the
// others of its entry (docs/uplink.md, "MQTT upstream").
type MQTTUplinkConfig struct {
	ClientID        string        `yaml:"client_id"`         // default cairn-<gateway_id>-<name>
	Topic           string        `yaml:"topic"`             // default cairn/{gateway}/{device}
	Payload         string        `yaml:"payload"`           // json | senml | influx
	Inflight        int           `yaml:"inflight"`          // default 100
	MaxMessageBytes ByteSize      `yaml:"max_message_bytes"` // default 128KiB
	KeepAlive       time.Duration `yaml:"keep_alive"`        // default 30s
	Version         string        `yaml:"mqtt_version"`      // 3.1.1 (default) or 5
}

// isMQTT reports whether the upstream is an MQTT broker.
func (u *UplinkConfig) isMQTT() bool { return u.kind() == "mqtt" }

// topicPlaceholderRE finds the {…} of a topic template.
var topicPlaceholderRE = regexp.MustCompile(`\{[^}]*\}`)

// validateMQTTUplink checks the keys of an upstream of kind mqtt, or that
// another kind has none of them, and sets opts.MQTT. bad reports keys as
// "uplink.<key>".
// Either data goes: readings, or the records of data: stats.
func validateMQTTUplink(u *UplinkConfig, opts *uplink.Options, _ uplink.Data, bad func(key, format string, a ...any)) {
	m := u.MQTTUplinkConfig
	if !u.isMQTT() {
		if m != (MQTTUplinkConfig{}) {
			bad("uplink.kind", "client_id, topic, payload, inflight, max_message_bytes, keep_alive and mqtt_version are for kind mqtt (got kind %s)", u.kind())
		}
		return
	}
	if u.Auth.TokenFile != "" {
		bad("uplink.auth.token_file", "kind mqtt logs in with username and password_file, or a client certificate (tls.cert_file)")
	}
	if u.Bucket != "" || u.Org != "" {
		bad("uplink.bucket", "is InfluxDB 2.x's: kind mqtt publishes to uplink.topic")
	}
	var payload uplink.MessageFormat
	if m.Payload != "" && m.Payload != "json" {
		f, err := uplink.ParseMessageFormat(m.Payload)
		if err != nil {
			bad("uplink.payload", "must be json, senml or influx (got %q)", m.Payload)
		}
		payload = f
	}
	if m.ClientID != "" && (len(m.ClientID) > 128 || strings.ContainsAny(m.ClientID, "+#/ \t\r\n")) {
		bad("uplink.client_id", "use up to 128 characters without + # / or spaces (got %q)", m.ClientID)
	}
	topic := m.Topic
	if topic == "" {
		topic = uplink.DefaultTopic
	}
	switch {
	case strings.ContainsAny(topic, "+#"):
		bad("uplink.topic", "a topic to publish to has no wildcard + or # (got %q)", topic)
	case strings.HasPrefix(topic, "$"):
		bad("uplink.topic", "topics starting with $ are the broker's (got %q)", topic)
	}
	for _, p := range topicPlaceholderRE.FindAllString(topic, -1) {
		if p != "{gateway}" && p != "{device}" && p != "{metric}" {
			bad("uplink.topic", "%s: the template knows {gateway}, {device} and {metric} (got %q)", p, topic)
		}
	}
	if m.Inflight < 0 || m.Inflight > 65535 {
		bad("uplink.inflight", "must be from 1 to 65535 messages (got %d)", m.Inflight)
	}
	if m.MaxMessageBytes != 0 && (m.MaxMessageBytes < 1<<10 || m.MaxMessageBytes > 256<<20) {
		bad("uplink.max_message_bytes", "must be from 1KiB to 256MiB, the most MQTT carries (got %s)", m.MaxMessageBytes)
	}
	if m.KeepAlive < 0 || (m.KeepAlive > 0 && m.KeepAlive < time.Second) {
		bad("uplink.keep_alive", "must be 1s or more (got %s)", m.KeepAlive)
	}
	version := uplink.MQTT311
	switch m.Version {
	case "", "3.1.1":
	case "5":
		version = uplink.MQTT5
		if p, err := url.Parse(u.URL); err == nil && p.Scheme != "mqtt" && p.Scheme != "mqtts" {
			bad("uplink.mqtt_version", "5 speaks to mqtt:// and mqtts:// URLs (got %s://)", p.Scheme)
		}
	default:
		bad("uplink.mqtt_version", "must be 3.1.1 or 5 (got %q)", m.Version)
	}
	opts.Format = uplink.JSON
	opts.MQTT = uplink.MQTTOptions{
		ClientID:        m.ClientID,
		Topic:           topic,
		Inflight:        m.Inflight,
		MaxMessageBytes: int(m.MaxMessageBytes),
		KeepAlive:       m.KeepAlive,
		Payload:         payload,
		Version:         version,
	}
}

// validateMQTTScheme checks, for an upstream of kind mqtt, that the tls
// keys go with a URL that has TLS (mqtts://, wss://), and that a wss://
// URL, whose connection speaks HTTP/1.1 before it speaks MQTT, offers no
// other ALPN protocol.
func validateMQTTScheme(u *UplinkConfig, bad func(key, format string, a ...any)) {
	p, err := url.Parse(u.URL)
	if !u.isMQTT() || err != nil {
		return // uplink.url's error, if any
	}
	switch p.Scheme {
	case "mqtt", "ws":
		if u.TLS != (TLSConfig{}) {
			bad("uplink.tls", "is for mqtts:// and wss:// URLs (got %q, which has no TLS)", u.URL)
		}
	case "wss":
		for _, proto := range u.TLS.ALPN.protocols() {
			if proto != "http/1.1" {
				bad("uplink.tls.alpn", "a wss:// connection speaks HTTP/1.1 first: offer no other protocol (got %q); AWS IoT Core's x-amzn-mqtt-ca is for mqtts:// on port 443", proto)
			}
		}
	}
}
