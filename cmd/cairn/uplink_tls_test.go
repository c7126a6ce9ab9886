package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/uplink"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for cn (a server for 127.0.0.1 when server is
// set, else a client) and returns it with its key, as PEM.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issueFor(t, cn, server, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// writeFile writes data into dir/name with mode (whatever the umask) and
// returns the path.
func writeFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask does not apply to Chmod
		t.Fatal(err)
	}
	return p
}

// TestUplink_TLS sends over HTTPS to a server that wants a client
// certificate: with the right CA and certificate the batch is taken; an
// upstream whose certificate the configured CA did not sign is refused,
// and nothing is sent to it.
func TestUplink_TLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "upstream CA")
	srvCert, srvKey := ca.issue(t, "upstream", true)
	cliCert, cliKey := ca.issue(t, "gw-test", false)
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	var accepted atomic.Int64
	var clientCN atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clientCN.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		accepted.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	good := TLSConfig{
		CAFile:   writeFile(t, dir, "ca.pem", ca.pem, 0o644),
		CertFile: writeFile(t, dir, "client.pem", cliCert, 0o644),
		KeyFile:  writeFile(t, dir, "client.key", cliKey, 0o600),
	}
	other := newTestCA(t, "someone else")
	wrongCA := good
	wrongCA.CAFile = writeFile(t, dir, "other-ca.pem", other.pem, 0o644)

	send := func(t *testing.T, tc TLSConfig) uplink.Status {
		t.Helper()
		cfg, err := tc.clientConfig()
		if err != nil {
			t.Fatal(err)
		}
		s, err := buffer.Open(buffer.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cur, err := s.Cursor(defaultUpstream)
		if err != nil {
			t.Fatal(err)
		}
		w := buffer.NewWriter(s, buffer.WriterOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		wdone := make(chan error, 1)
		go func() { wdone <- w.Run(ctx) }()
		res := make(chan buffer.Result, 1)
		r := buffer.Reading{Device: "d", Metric: "m", TS: time.Now().UnixNano(), Value: 1}
		if err := w.Submit(ctx, []buffer.Reading{r}, func(r buffer.Result) { res <- r }); err != nil {
			t.Fatal(err)
		}
		<-res
		u, err := uplink.New(cur, uplink.Options{URL: srv.URL + "/write", Gateway: "gw-test", TLS: cfg,
			Interval: time.Millisecond, RetryWaitMin: 50 * time.Millisecond, RetryWaitMax: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		udone := make(chan error, 1)
		go func() { udone <- u.Run(ctx) }()
		waitUntil(t, 20*time.Second, "the batch to be sent or refused", func() (bool, string) {
			st := u.Status()
			return st.SentBatches > 0 || st.Retries > 1, ""
		})
		cancel()
		if err := <-udone; err != nil {
			t.Error(err)
		}
		if err := <-wdone; err != nil {
			t.Error(err)
		}
		return u.Status()
	}

	t.Run("verified", func(t *testing.T) {
		st := send(t, good)
		if st.SentReadings != 1 || accepted.Load() != 1 || clientCN.Load() != "gw-test" {
			t.Errorf("status %+v, server took %d batches from %v", st, accepted.Load(), clientCN.Load())
		}
	})
	t.Run("upstream certificate not verified", func(t *testing.T) {
		before := accepted.Load()
		st := send(t, wrongCA)
		if st.SentBatches != 0 || accepted.Load() != before || !strings.Contains(st.LastError, "certificate signed by unknown authority") {
			t.Errorf("status %+v: want the batch refused for the upstream's certificate", st)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		before := accepted.Load()
		st := send(t, TLSConfig{CAFile: good.CAFile})
		if st.SentBatches != 0 || accepted.Load() != before || st.LastError == "" {
			t.Errorf("status %+v: want the server to refuse a client without a certificate", st)
		}
	})
}
