package uplink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// azureAPIVersion is the IoT Hub API version cairn names in its MQTT
// user name.
const azureAPIVersion = "2021-04-12"

// AzureSAS makes the MQTT credentials of a device of Azure IoT Hub that
// authenticates with a symmetric key: the user name
// "{hub}.azure-devices.net/{device}/?api-version=2021-04-12" and, as the
// password, a shared access signature token signed with the device key,
// as Microsoft documents it ("Control access to IoT Hub with shared
// access signatures"):
//
//	SharedAccessSignature sr={URL-encoded resource URI}&sig={signature}&se={expiry}
//
// where the resource URI is "{hub}.azure-devices.net/devices/{device}",
// expiry is in seconds since the epoch, and the signature is the
// URL-encoded base64 of the HMAC-SHA256, keyed with the base64-decoded
// device key, of "{URL-encoded resource URI}\n{expiry}". URL encoding is
// JavaScript's encodeURIComponent, as in Microsoft's Node.js SDK.
type AzureSAS struct {
	Host   string // the hub's host name, {hub}.azure-devices.net
	Device string // the device id
	key    []byte // decoded
}

// NewAzureSAS returns the signer of the device's tokens. key is the
// device's primary or secondary key, in base64 as the portal shows it;
// surrounding white space (a key file's final newline) is ignored.
func NewAzureSAS(host, device, key string) (*AzureSAS, error) {
	if host == "" || device == "" {
		return nil, fmt.Errorf("azure sas: host and device must not be empty")
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(key))
	if err != nil {
		return nil, fmt.Errorf("not a device key (the primary or secondary key as the portal shows it, in base64): %w", err)
	}
	if len(k) == 0 {
		return nil, fmt.Errorf("the device key is empty")
	}
	return &AzureSAS{Host: host, Device: device, key: k}, nil
}

// Username returns the MQTT user name of the device.
func (a *AzureSAS) Username() string {
	return a.Host + "/" + a.Device + "/?api-version=" + azureAPIVersion
}

// ResourceURI returns the device's resource URI, which its tokens grant.
func (a *AzureSAS) ResourceURI() string { return a.Host + "/devices/" + a.Device }

// Token returns the token that expires at expiry (whole seconds).
func (a *AzureSAS) Token(expiry time.Time) string {
	return sasToken(a.ResourceURI(), a.key, expiry.Unix())
}

// sasToken returns the token for the resource uri, signed with key,
// expiring at se seconds since the epoch.
func sasToken(uri string, key []byte, se int64) string {
	sr := encodeURIComponent(uri)
	exp := strconv.FormatInt(se, 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(sr + "\n" + exp))
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return "SharedAccessSignature sr=" + sr + "&sig=" + encodeURIComponent(sig) + "&se=" + exp
}

// encodeURIComponent escapes s as JavaScript's encodeURIComponent does:
// every byte but the letters, digits and -_.!~*'() as %XX, upper-case hex.
func encodeURIComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// SASRenewer hands out the current token of an AzureSAS and makes a new
// one when the current one has lived RenewAt of its lifetime. It is safe
// for concurrent use.
type SASRenewer struct {
	sas      *AzureSAS
	lifetime time.Duration
	now      func() time.Time

	mu     sync.Mutex // guards token, issued, expiry
	token  string
	issued time.Time
	expiry time.Time
}

// RenewAt is the part of a token's lifetime after which SASRenewer makes
// a new one.
const RenewAt = 0.8

// MinTokenLifetime is the shortest lifetime of a SAS token: renewed at
// RenewAt of it, such a token leaves a second for the messages in flight
// on the old connection to be acknowledged. Tests use it; a gateway does
// well with an hour.
const MinTokenLifetime = 5 * time.Second

// NewSASRenewer returns a renewer of tokens that live lifetime (at least
// MinTokenLifetime), by the clock now (nil: time.Now).
func NewSASRenewer(sas *AzureSAS, lifetime time.Duration, now func() time.Time) (*SASRenewer, error) {
	if lifetime < MinTokenLifetime {
		return nil, fmt.Errorf("azure sas: token lifetime must be at least %s (got %s)", MinTokenLifetime, lifetime)
	}
	if now == nil {
		now = time.Now
	}
	return &SASRenewer{sas: sas, lifetime: lifetime, now: now}, nil
}

// Password returns the token to connect with: the current one, or a new
// one when there is none yet or the current one is due for renewal.
func (r *SASRenewer) Password() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.token == "" || !now.Before(r.renewAt()) {
		// The expiry is rounded up to a whole second: a token never
		// lives less than lifetime.
		r.issued = now
		r.expiry = now.Add(r.lifetime + time.Second - 1).Truncate(time.Second)
		r.token = r.sas.Token(r.expiry)
	}
	return r.token
}

// Credentials returns the user name and Password: a paho
// CredentialsProvider, called on every connection.
func (r *SASRenewer) Credentials() (username, password string) {
	return r.sas.Username(), r.Password()
}

// Device returns the device id the tokens are for.
func (r *SASRenewer) Device() string { return r.sas.Device }

// RenewIn returns how long until the current token is due for renewal
// (0 if it is due, or none was handed out): the caller reconnects with a
// new Password then, since IoT Hub closes a connection whose token
// expires.
func (r *SASRenewer) RenewIn() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token == "" {
		return 0
	}
	return max(r.renewAt().Sub(r.now()), 0)
}

// Expiry returns when the current token expires (zero if none was
// handed out).
func (r *SASRenewer) Expiry() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expiry
}

// renewAt returns when the current token is due for renewal. r.mu is held.
func (r *SASRenewer) renewAt() time.Time {
	return r.issued.Add(time.Duration(float64(r.lifetime) * RenewAt))
}
