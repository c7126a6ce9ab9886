package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// textSink is an HTTP upstream that takes cairn's JSON batches and keeps
// the text readings in them.
type textSink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	texts map[[2]string][]sentText // by device and metric, in arrival order
}

// sentText is one text reading as an upstream received it.
type sentText struct {
	ts   time.Time
	text string
}

func newTextSink(t *testing.T) *textSink {
	s := &textSink{texts: map[[2]string][]sentText{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		var batch struct {
			Readings []struct {
				Device string   `json:"device"`
				Metric string   `json:"metric"`
				TS     string   `json:"ts"`
				Text   *string  `json:"text"`
				Value  *float64 `json:"value"`
			} `json:"readings"`
		}
		if err := json.NewDecoder(body).Decode(&batch); err != nil {
			t.Errorf("upstream: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, rd := range batch.Readings {
			if rd.Text == nil {
				continue
			}
			ts, err := time.Parse(time.RFC3339Nano, rd.TS)
			if err != nil || rd.Value != nil {
				t.Errorf("upstream: text reading %+v: ts %v, value %v", rd, err, rd.Value)
			}
			k := [2]string{rd.Device, rd.Metric}
			s.texts[k] = append(s.texts[k], sentText{ts, *rd.Text})
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// wantText is a text reading a fixture must give: exactly at its time, or
// received between the publish and its PUBACK.
type wantText struct {
	device, metric, text string
	from, to             time.Time // equal for a device's own time
}

// TestRun_PresetTexts publishes each preset's fixtures that hold texts
// (states and events copied from the firmwares' documentation) through
// the embedded broker to a cairn run that names only the preset, and reads
// every text back exactly, with its time, from the query API and from
// what cairn sends upstream as JSON.
func TestRun_PresetTexts(t *testing.T) {
	byPreset := map[string][]testkit.Fixture{}
	for _, fx := range testkit.LoadFixtures(t, filepath.Join("..", "..", "gateway", "payload", "testdata", "presets")) {
		if slices.ContainsFunc(fx.Readings, func(r testkit.FixtureReading) bool { return r.Text != "" }) && fx.TimeZone == "" {
			byPreset[fx.Preset] = append(byPreset[fx.Preset], fx)
		}
	}
	for _, preset := range []string{"zigbee2mqtt", "homeassistant-statestream", "esphome", "shelly", "shelly-rpc", "tasmota", "telegraf", "senml"} {
		if len(byPreset[preset]) == 0 {
			t.Errorf("preset %s has no fixture with a text", preset)
		}
	}
	for _, preset := range slices.Sorted(maps.Keys(byPreset)) {
		t.Run(preset, func(t *testing.T) {
			sink := newTextSink(t)
			cfg := strings.NewReplacer("%PRESET%", preset, "%ZONE%", "").Replace(presetsConfig) +
				fmt.Sprintf("uplink:\n  url: %s/texts\n  format: json\n  interval: 100ms\n", sink.srv.URL)
			p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), cfg))
			pub := mustConnect(t, p.mqtt, "texts-publisher")
			var want []wantText
			for _, fx := range byPreset[preset] {
				sent := time.Now()
				if err := publish1(pub, fx.Topic, string(fx.Payload)); err != nil {
					t.Fatalf("%s: %v", fx.Name, err)
				}
				acked := time.Now()
				for _, r := range fx.Readings {
					if r.Text == "" {
						continue
					}
					w := wantText{device: r.Device, metric: r.Metric, text: r.Text, from: r.At, to: r.At}
					if r.At.IsZero() {
						w.from, w.to = sent.Add(r.Offset), acked.Add(r.Offset)
					}
					want = append(want, w)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				missing := sink.missing(want)
				if len(missing) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("texts not received upstream: %+v\nreceived %+v\ncairn log:\n%s", missing, sink.snapshot(), p.out)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if extra := sink.count() - len(want); extra != 0 {
				t.Errorf("upstream received %d texts, want %d: %+v", sink.count(), len(want), sink.snapshot())
			}
			api := newAPIClient(p.http)
			stored := map[[2]string][]sentText{}
			for _, w := range want {
				k := [2]string{w.device, w.metric}
				if _, ok := stored[k]; ok {
					continue
				}
				stored[k] = apiTexts(t, api, w.device, w.metric)
			}
			if missing := matchTexts(stored, want); len(missing) != 0 {
				t.Errorf("texts not given back by /v1/devices/{device}/readings: %+v\ngot %+v", missing, stored)
			}
			if n := countTexts(stored); n != len(want) {
				t.Errorf("/v1/devices/{device}/readings gave %d texts, want %d: %+v", n, len(want), stored)
			}
		})
	}
}

// apiTexts returns the text readings of a series, oldest first, as
// /v1/devices/{device}/readings gives them.
func apiTexts(t *testing.T, api *apiClient, device, metric string) []sentText {
	t.Helper()
	var doc struct {
		Readings []struct {
			Metric string   `json:"metric"`
			TS     string   `json:"ts"`
			Text   *string  `json:"text"`
			Value  *float64 `json:"value"`
		} `json:"readings"`
	}
	path := "/v1/devices/" + url.PathEscape(device) + "/readings?order=asc&limit=1000&metric=" + url.QueryEscape(metric)
	if code := api.get(t, path, &doc); code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, code)
	}
	var out []sentText
	for _, rd := range doc.Readings {
		ts, err := time.Parse(time.RFC3339Nano, rd.TS)
		if err != nil || rd.Text == nil || rd.Value != nil {
			t.Fatalf("GET %s: reading %+v is not a text reading (ts: %v)", path, rd, err)
		}
		out = append(out, sentText{ts, *rd.Text})
	}
	return out
}

func countTexts(texts map[[2]string][]sentText) int {
	n := 0
	for _, ts := range texts {
		n += len(ts)
	}
	return n
}

// missing returns the texts of want the sink has not received, each
// received text answering one of them.
func (s *textSink) missing(want []wantText) []wantText {
	s.mu.Lock()
	defer s.mu.Unlock()
	return matchTexts(s.texts, want)
}

// matchTexts returns the texts of want that texts does not hold, each
// text of texts answering one of them.
func matchTexts(texts map[[2]string][]sentText, want []wantText) []wantText {
	used := map[[2]string][]bool{}
	var out []wantText
	for _, w := range want {
		k := [2]string{w.device, w.metric}
		if used[k] == nil {
			used[k] = make([]bool, len(texts[k]))
		}
		found := false
		for i, got := range texts[k] {
			if !used[k][i] && got.text == w.text && !got.ts.Before(w.from) && !got.ts.After(w.to) {
				used[k][i], found = true, true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

func (s *textSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ts := range s.texts {
		n += len(ts)
	}
	return n
}

func (s *textSink) snapshot() map[[2]string][]sentText {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.texts)
}
