package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRun_PrometheusScrapesMetrics: a Prometheus server scrapes cairn's
// /metrics and takes every line of it: the target is up with no sample
// refused, and it stores the gateway's counters, a sensor's reading
// (http.metrics_readings) with its labels, and the Go and process
// figures. promtool finds nothing wrong with the text either.
func TestRun_PrometheusScrapesMetrics(t *testing.T) {
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), testDefaults(telemetryConfig("{temp: °C}", "  metrics_readings: true\n"))))
	c := mustConnect(t, p.mqtt, "scraped")
	waitToken(t, c.Publish(`sensors/porch "1"/telemetry`, 1, false, `{"temp":21.5}`))
	waitToken(t, c.Publish("sensors/hall/telemetry", 1, false, `{"temp":-3e-7}`))

	_, body, err := newAPIClient(p.http).fetch("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	lint := exec.Command(program(t, "promtool"), "check", "metrics")
	lint.Stdin = strings.NewReader(string(body))
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	prom := newPrometheus(t)
	prom.config = fmt.Sprintf("scrape_configs:\n  - job_name: cairn\n    scrape_interval: 1s\n    static_configs:\n      - targets: [%q]\n", p.http)
	prom.start(t)
	want := map[string]func(float64) bool{
		`up{job="cairn"}`: func(v float64) bool { return v == 1 },
		`scrape_samples_post_metric_relabeling{job="cairn"} - scrape_samples_scraped{job="cairn"}`: func(v float64) bool { return v == 0 },
		`cairn_ingest_stored_total`:                                   func(v float64) bool { return v == 2 },
		`cairn_reading{device="porch \"1\"",metric="temp",unit="°C"}`: func(v float64) bool { return v == 21.5 },
		`cairn_reading{device="hall",metric="temp"}`:                  func(v float64) bool { return v == -3e-7 },
		`cairn_http_refused_total{reason="wrong_host"}`:               func(v float64) bool { return v == 0 },
		`go_goroutines`:                       func(v float64) bool { return v > 5 },
		`go_memstats_alloc_bytes`:             func(v float64) bool { return v > 1<<20 },
		`process_resident_memory_bytes`:       func(v float64) bool { return v > 4<<20 },
		`process_cpu_seconds_total`:           func(v float64) bool { return v > 0 },
		`time() - process_start_time_seconds`: func(v float64) bool { return v > 0 && v < 600 },
		`process_open_fds`:                    func(v float64) bool { return v > 3 },
	}
	// Refused once, to have that counter on the page.
	req, _ := http.NewRequest("GET", "http://"+p.http+"/v1/status", nil)
	req.Host = "elsewhere.example"
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("wrong host: %v %v", res, err)
	} else {
		res.Body.Close()
		want[`cairn_http_refused_total{reason="wrong_host"}`] = func(v float64) bool { return v == 1 }
	}
	for q, ok := range want {
		waitUntil(t, 30*time.Second, "Prometheus to answer "+q, func() (bool, string) {
			v, err := promInstant(prom, q)
			return err == nil && ok(v), fmt.Sprintf("%v %v", v, err)
		})
	}
}

// promInstant asks Prometheus for q now and returns the one value of its
// answer.
func promInstant(s *prometheusServer, q string) (float64, error) {
	resp, err := http.Get(s.base() + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var doc struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return 0, err
	}
	if len(doc.Data.Result) != 1 {
		return 0, fmt.Errorf("%d series", len(doc.Data.Result))
	}
	s2, _ := doc.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s2, 64)
}
