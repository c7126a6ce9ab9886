package uplink

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSASToken_ReferenceVector checks a token against the one Microsoft's
// Node.js IoT SDK expects in its own tests: SharedAccessSignature.create(
// 'uri', null, base64('password'), 12345) in Azure/azure-iot-sdk-node,
// common/core/test/_shared_access_signature_test.js.
func TestSASToken_ReferenceVector(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString("cGFzc3dvcmQ=") // "password"
	if err != nil {
		t.Fatal(err)
	}
	got := sasToken("uri", key, 12345)
	want := "SharedAccessSignature sr=uri&sig=kcWxXAK2OAaAoq2oCkaGzX2NMqDB8nCyNuq2fPYCDhk%3D&se=12345"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestAzureSAS_MatchesOpenSSL signs a device's token as the documented
// algorithm says, with openssl, and compares.
func TestAzureSAS_MatchesOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl not found")
	}
	const key = "dGhpcyBpcyBub3QgYSByZWFsIGRldmljZSBrZXkhIQ=="
	sas, err := NewAzureSAS("cairn-test.azure-devices.net", "pi kitchen/1", key+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sas.Username(), "cairn-test.azure-devices.net/pi kitchen/1/?api-version=2021-04-12"; got != want {
		t.Errorf("Username: got %q, want %q", got, want)
	}
	expiry := time.Unix(1764288000, 0)
	got := sas.Token(expiry)

	sr := "cairn-test.azure-devices.net%2Fdevices%2Fpi%20kitchen%2F1"
	raw, _ := base64.StdEncoding.DecodeString(key)
	cmd := exec.Command(openssl, "dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:"+hex.EncodeToString(raw), "-binary")
	cmd.Stdin = strings.NewReader(sr + "\n1764288000")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("openssl: %v", err)
	}
	sig := strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(base64.StdEncoding.EncodeToString(out.Bytes()))
	want := "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=1764288000"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestNewAzureSAS_BadKey(t *testing.T) {
	for _, key := range []string{"", "not base64!", "  \n"} {
		if _, err := NewAzureSAS("h.azure-devices.net", "d", key); err == nil {
			t.Errorf("key %q: no error", key)
		}
	}
	if _, err := NewAzureSAS("", "d", "cGFzc3dvcmQ="); err == nil {
		t.Error("no host: no error")
	}
}

// TestSASRenewer_RenewsAt80Percent steps a clock through two lifetimes.
func TestSASRenewer_RenewsAt80Percent(t *testing.T) {
	sas, err := NewAzureSAS("h.azure-devices.net", "d", "cGFzc3dvcmQ=")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1764288000, 0).Add(300 * time.Millisecond)
	r, err := NewSASRenewer(sas, time.Hour, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if got := r.RenewIn(); got != 0 {
		t.Errorf("RenewIn before any token: got %s, want 0", got)
	}
	first := r.Password()
	if got, want := r.Expiry(), time.Unix(1764288000+3601, 0); !got.Equal(want) {
		t.Errorf("Expiry: got %s, want %s (an hour, rounded up to a second)", got, want)
	}
	if want := sas.Token(r.Expiry()); first != want {
		t.Errorf("Password: got %s, want %s", first, want)
	}
	if got, want := r.RenewIn(), 48*time.Minute; got != want {
		t.Errorf("RenewIn: got %s, want %s", got, want)
	}
	now = now.Add(48*time.Minute - time.Nanosecond)
	if got := r.Password(); got != first {
		t.Error("renewed before 80% of its lifetime")
	}
	now = now.Add(time.Nanosecond)
	if got := r.RenewIn(); got != 0 {
		t.Errorf("RenewIn at 80%%: got %s, want 0", got)
	}
	second := r.Password()
	if second == first {
		t.Error("not renewed at 80% of its lifetime")
	}
	if !strings.HasSuffix(second, "&se=1764294481") {
		t.Errorf("renewed token %s: want se=1764294481", second)
	}
	if got, want := r.RenewIn(), 48*time.Minute; got != want {
		t.Errorf("RenewIn after renewal: got %s, want %s", got, want)
	}
	if _, err := NewSASRenewer(sas, MinTokenLifetime-time.Millisecond, nil); err == nil {
		t.Errorf("a lifetime under %s: no error", MinTokenLifetime)
	}
	if _, err := NewSASRenewer(sas, MinTokenLifetime, nil); err != nil {
		t.Errorf("a lifetime of %s: %v", MinTokenLifetime, err)
	}
}
