package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
)

// vmSeries is one series as VictoriaMetrics' export API returns it.
type vmSeries struct {
	Metric     map[string]string `json:"metric"`
	Values     []float64         `json:"values"`
	Timestamps []int64           `json:"timestamps"` // ms
}

// export has VictoriaMetrics flush what it took, and returns the series
// its export API answers q (match[], start, end) with.
func (v *victoriaMetrics) export(t *testing.T, q url.Values) []vmSeries {
	t.Helper()
	resp, err := http.Get(v.base() + "/internal/force_flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(v.base() + "/api/v1/export?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("export: %s: %s", resp.Status, b)
	}
	var out []vmSeries
	dec := json.NewDecoder(resp.Body)
	for {
		var s vmSeries
		if err := dec.Decode(&s); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
}

// promSeries is one series of a Prometheus range query's result.
type promSeries struct {
	metric  map[string]string
	samples []promSample
}

type promSample struct {
	ms    int64
	value float64
}

// rangeQuery asks Prometheus' query API for q (query, a range selector,
// and time) and returns the series it answers with, their samples as they
// are stored.
func (s *prometheusServer) rangeQuery(t *testing.T, q url.Values) []promSeries {
	t.Helper()
	resp, err := http.Get(s.base() + "/api/v1/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %s: %s", resp.Status, body)
	}
	var doc struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("query: %v: %s", err, body)
	}
	out := make([]promSeries, len(doc.Data.Result))
	for i, r := range doc.Data.Result {
		out[i].metric = r.Metric
		for _, v := range r.Values {
			sec, ok1 := v[0].(float64)
			str, ok2 := v[1].(string)
			val, err := strconv.ParseFloat(str, 64)
			if !ok1 || !ok2 || err != nil {
				t.Fatalf("query: sample %v", v)
			}
			out[i].samples = append(out[i].samples, promSample{ms: int64(math.Round(sec * 1000)), value: val})
		}
	}
	return out
}

// queue adds n messages to f, a millisecond apart from first (ms) on,
// from the devices prefix-0 to prefix-(f.devices-1) in turn.
func (f *sensorFleet) queue(prefix string, first int64, n int) {
	for range n {
		i := f.acks.add()
		f.msgs = append(f.msgs, newSensorMessage(fmt.Sprintf("%s-%d", prefix, i%f.devices), first+int64(i), i))
	}
}

// publishNew queues n messages as queue does and publishes them, with any
// left unacknowledged before, to addr; it fails the test when a
// connection fails.
func (f *sensorFleet) publishNew(t *testing.T, addr, prefix string, first int64, n int) {
	t.Helper()
	f.queue(prefix, first, n)
	if err := f.publish(addr, false, nil); err != nil {
		t.Fatal(err)
	}
}
