package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/uplink"
)

// AzureConfig is the azure: block of an upstream of kind mqtt: cairn logs
// in to Azure IoT Hub as the device, with SAS tokens it makes from the
// device key and renews before they expire (docs/uplink.md, "Azure IoT
// Hub").
type AzureConfig struct {
	DeviceID      string        `yaml:"device_id"`
	KeyFile       string        `yaml:"key_file"`       // the device's primary or secondary key, base64
	TokenLifetime time.Duration `yaml:"token_lifetime"` // default 1h
}

// defaultTokenLifetime is azure.token_lifetime unless set.
const defaultTokenLifetime = time.Hour

// azureDeviceIDRE is what IoT Hub takes as a device id.
var azureDeviceIDRE = regexp.MustCompile(`^[A-Za-z0-9\-.%_*?!(),:=@$']{1,128}$`)

// validateAzureUplink checks the azure: block of u and sets the client id
// and the topic IoT Hub wants in opts. It runs after validateMQTTUplink.
func validateAzureUplink(u *UplinkConfig, opts *uplink.Options, bad func(key, format string, a ...any)) {
	a := u.Azure
	if a == (AzureConfig{}) {
		return
	}
	if !u.isMQTT() {
		bad("uplink.azure", "is for kind mqtt, IoT Hub's MQTT (got kind %s)", u.kind())
		return
	}
	if !azureDeviceIDRE.MatchString(a.DeviceID) {
		bad("uplink.azure.device_id", "must be the device's id in IoT Hub: 1 to 128 of A-Z a-z 0-9 - . %% _ * ? ! ( ) , : = @ $ ' (got %q)", a.DeviceID)
	}
	if a.KeyFile == "" {
		bad("uplink.azure.key_file", "must be set: a file holding the device's primary or secondary key (mode 0600)")
	}
	if a.TokenLifetime != 0 && a.TokenLifetime < uplink.MinTokenLifetime {
		bad("uplink.azure.token_lifetime", "must be at least %s (got %s); the default is %s", uplink.MinTokenLifetime, a.TokenLifetime, defaultTokenLifetime)
	}
	if u.Auth.Username != "" || u.Auth.PasswordFile != "" {
		bad("uplink.auth", "azure logs in with the device key: leave username and password_file out")
	}
	if u.Version != "" && u.Version != "3.1.1" {
		bad("uplink.mqtt_version", "IoT Hub speaks MQTT 3.1.1: leave it out with azure (got %q)", u.Version)
	}
	if u.ClientID != "" && u.ClientID != a.DeviceID {
		bad("uplink.client_id", "IoT Hub takes the device id as client id: leave it out (got %q, device_id %q)", u.ClientID, a.DeviceID)
	}
	events := "devices/" + a.DeviceID + "/messages/events/"
	if u.Topic != "" && !strings.HasPrefix(u.Topic, events) {
		bad("uplink.topic", "IoT Hub takes a device's messages on %s, with message properties after it, or leave it out (got %q)", events, u.Topic)
	}
	opts.MQTT.ClientID = a.DeviceID
	if u.Topic == "" {
		opts.MQTT.Topic = events
	}
}

// azureHub returns the hub's host name, which the device's user name and
// tokens name: tls.server_name, or else the host of the url.
func (u *UplinkConfig) azureHub() string {
	if u.TLS.ServerName != "" {
		return u.TLS.ServerName
	}
	if p, err := url.Parse(u.URL); err == nil {
		return p.Hostname()
	}
	return ""
}

// loadAzureKey reads the device key of the azure: block, if any, and
// makes opts' token renewer.
func (u *UplinkConfig) loadAzureKey(opts *uplink.Options) error {
	a := u.Azure
	if a.KeyFile == "" {
		return nil
	}
	key, err := readSecret(a.KeyFile)
	if err != nil {
		return fmt.Errorf("%s.azure.key_file: %w", u.keyPath(), err)
	}
	sas, err := uplink.NewAzureSAS(u.azureHub(), a.DeviceID, string(key))
	if err != nil {
		return fmt.Errorf("%s.azure.key_file: %s: %w", u.keyPath(), secretPath(a.KeyFile), err)
	}
	life := a.TokenLifetime
	if life == 0 {
		life = defaultTokenLifetime
	}
	r, err := uplink.NewSASRenewer(sas, life, nil)
	if err != nil {
		return fmt.Errorf("%s.azure.token_lifetime: %w", u.keyPath(), err)
	}
	opts.MQTT.SAS = r
	return nil
}
