package httpapi

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetrics_TextFormat: /metrics in Prometheus's text format, families
// sorted by name with their HELP and TYPE, samples by label values,
// label values and help escaped, values as the client library writes
// them; gzipped for a client that accepts it; and a collector that gives
// a metric the wrong number of labels is a 500 naming it.
func TestMetrics_TextFormat(t *testing.T) {
	reg := NewRegistry()
	b := NewDesc("b_total", "B.\nSecond \\ line.", "k")
	a := NewDesc("a", "A.")
	reg.Register(CollectorFunc(func(s *Sink) {
		s.Counter(b, 2, `y"\`+"\n")
		s.Counter(b, 1e7, "x")
		s.Gauge(a, -0.5)
	}))
	refused := NewCounterVec(NewDesc("c_total", "C.", "reason"))
	refused.Inc("r")
	refused.Inc("r")
	reg.Register(refused)
	want := "# HELP a A.\n# TYPE a gauge\na -0.5\n" +
		"# HELP b_total B.\\nSecond \\\\ line.\n# TYPE b_total counter\nb_total{k=\"x\"} 1e+07\nb_total{k=\"y\\\"\\\\\\n\"} 2\n" +
		"# HELP c_total C.\n# TYPE c_total counter\nc_total{reason=\"r\"} 2\n"

	srv := httptest.NewServer(metricsHandler(reg))
	defer srv.Close()
	get := func(enc string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept-Encoding", enc)
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r io.Reader = res.Body
		if res.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(body)
	}
	for _, enc := range []string{"identity", "gzip", "deflate, gzip;q=0.5", "gzip;q=0"} {
		res, body := get(enc)
		zipped := res.Header.Get("Content-Encoding") == "gzip"
		if wantZip := strings.Contains(enc, "gzip") && !strings.Contains(enc, "q=0,") && enc != "gzip;q=0"; zipped != wantZip {
			t.Errorf("Accept-Encoding %q: gzipped %v", enc, zipped)
		}
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != metricsContentType || body != want {
			t.Errorf("Accept-Encoding %q: %d %q\n%s\nwant\n%s", enc, res.StatusCode, res.Header.Get("Content-Type"), body, want)
		}
	}

	reg.Register(CollectorFunc(func(s *Sink) { s.Gauge(a, 1, "extra") }))
	if res, body := get(""); res.StatusCode != 500 || !strings.Contains(body, "metric a: 1 label values for 0 labels") {
		t.Errorf("bad collector: %d %s", res.StatusCode, body)
	}
}
