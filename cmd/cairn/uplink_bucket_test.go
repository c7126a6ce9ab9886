package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recordingProxy is a reverse proxy in front of an upstream that records
// every request it passes on: when, where to, with which Authorization,
// and how many bytes of body, as posted.
type recordingProxy struct {
	srv *httptest.Server
	mu  sync.Mutex // guards reqs
	// reqs are the requests passed on, in the order they came.
	reqs []proxiedRequest
}

type proxiedRequest struct {
	at          time.Time // when its body was read whole
	path, query string
	auth        string
	body        int64 // bytes, as posted (compressed)
}

// newRecordingProxy returns a proxy to target that does not listen yet:
// start it.
func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &recordingProxy{}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client went away
		}
		p.mu.Lock()
		p.reqs = append(p.reqs, proxiedRequest{at: time.Now(), path: r.URL.Path, query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), body: int64(len(body))})
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// start has the proxy listen on addr (127.0.0.1:0 for any port) and
// returns its base URL.
func (p *recordingProxy) start(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.srv.Listener.Close()
	p.srv.Listener = ln
	p.srv.Start()
	return p.srv.URL
}

// requests returns the requests passed on so far.
func (p *recordingProxy) requests() []proxiedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxiedRequest(nil), p.reqs...)
}

// TestUplink_InfluxV2Write has a cairn process with uplink.org,
// uplink.bucket and a token write to a real VictoriaMetrics through
// InfluxDB 2.x's API, /api/v2/write, behind a proxy that records each
// request: every request goes to /api/v2/write with the org, the bucket
// and precision=ns, and Authorization: Token and the file's token; every
// reading is read back from VictoriaMetrics (which takes the API, and
// ignores org and bucket) with its nanosecond timestamp cut to
// milliseconds, as from /write.
func TestUplink_InfluxV2Write(t *testing.T) {
	vm := newVictoriaMetrics(t)
	vm.start(t)
	proxy := newRecordingProxy(t, vm.base())
	base := proxy.start(t, "127.0.0.1:0")
	token := filepath.Join(t.TempDir(), "influx-token")
	if err := os.WriteFile(token, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := uplinkTo(base, `  org: acme
  bucket: sensors
  auth:
    token_file: `+token+`
    scheme: Token
`)
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), cfg))
	fleet := &sensorFleet{devices: 5, window: 64, acks: newAckLog(0)}
	fleet.publishNew(t, p.mqtt, "dev", t0, 1000)
	api := newAPIClient(p.http)
	st := waitSent(t, api)
	wantURL := base + "/api/v2/write?bucket=sensors&org=acme&precision=ns"
	if st.Uplink.URL != wantURL || st.Uplink.SentReadings != 2000 || st.Uplink.ParkedBatches != 0 {
		t.Errorf("uplink status: %+v, want url %s and 2000 readings sent", *st.Uplink, wantURL)
	}
	reqs := proxy.requests()
	if len(reqs) < 4 {
		t.Errorf("%d requests, want at least 4 (batches of 500 readings)", len(reqs))
	}
	for i, r := range reqs {
		if r.path != "/api/v2/write" || r.query != "bucket=sensors&org=acme&precision=ns" || r.auth != "Token s3cret-token" {
			t.Errorf("request %d: POST %s?%s with Authorization %q, want /api/v2/write?bucket=sensors&org=acme&precision=ns and Token s3cret-token",
				i, r.path, r.query, r.auth)
		}
	}
	checkUpstream(t, vm, fleet.msgs, fleet.acks)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
}

// TestLoadConfig_UplinkBucketAndRate: uplink.bucket and org make the
// /api/v2/write URL from uplink.url, and max_bytes_per_second takes a
// size; a bucket with another format, an org without a bucket, a URL
// that is another write API's or already names the bucket, and a cap
// that is not a size stop the start naming the file and the key.
func TestLoadConfig_UplinkBucketAndRate(t *testing.T) {
	load := func(yaml string) (*Config, string, error) {
		path := filepath.Join(t.TempDir(), "cairn.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		return cfg, path, err
	}
	cfg, _, err := load("uplink:\n  url: https://db.example:8086\n  org: acme\n  bucket: sensors\n  max_bytes_per_second: 16KiB\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://db.example:8086/api/v2/write?bucket=sensors&org=acme&precision=ns"; cfg.uplinks[0].URL != want {
		t.Errorf("uplink URL: got %q, want %q", cfg.uplinks[0].URL, want)
	}
	if cfg.uplinks[0].MaxBytesPerSecond != 16<<10 {
		t.Errorf("max bytes per second: got %d, want %d", cfg.uplinks[0].MaxBytesPerSecond, 16<<10)
	}
	cfg, _, err = load("uplink:\n  url: http://127.0.0.1:8428/write\n")
	if err != nil || cfg.uplinks[0].URL != "http://127.0.0.1:8428/write" || cfg.uplinks[0].MaxBytesPerSecond != 0 {
		t.Errorf("without bucket and cap: %v, %+v; want the URL as it is and no cap", err, cfg.uplinks)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"uplink:\n  url: http://db:8086\n  format: json\n  bucket: sensors\n",
			"uplink.bucket: only kind influx writes to a bucket (InfluxDB 2.x's /api/v2/write); kind json posts to uplink.url as it is"},
		{"uplink:\n  url: http://db:8086/write?db=sensors\n  org: acme\n",
			`uplink.org: goes with uplink.bucket, InfluxDB 2.x's (got org "acme" and no bucket)`},
		{"uplink:\n  url: http://db:8086/write\n  bucket: sensors\n",
			`uplink.url: with a bucket, give the server's address, such as http://db:8086, and cairn posts to its /api/v2/write (got "http://db:8086/write")`},
		{"uplink:\n  url: http://db:8086/api/v2/write?bucket=x\n  bucket: sensors\n",
			`uplink.url: holds "bucket": with a bucket, cairn sets org, bucket and precision itself`},
		{"uplink:\n  url: http://db:8086\n  max_bytes_per_second: auto\n",
			"uplink.max_bytes_per_second: must be 0 (no limit) or a number of bytes, such as 2000 or 16KiB (got auto)"},
		{"uplink:\n  url: http://db:8086\n  max_bytes_per_second: fast\n",
			`uplink.max_bytes_per_second: cannot use "fast" as a size`},
	} {
		_, path, err := load(tc.yaml)
		var ce *configError
		if err == nil || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\ngot %v\nwant a config error (exit status 78) starting with the file name, with %q", tc.yaml, err, tc.want)
		}
	}
}
