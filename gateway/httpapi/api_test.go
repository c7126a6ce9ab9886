package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// testAPI is an API over a real store and its running Writer, for the
// length of the test.
type testAPI struct {
	api *API
	w   *buffer.Writer
}

func newTestAPI(t *testing.T) *testAPI {
	t.Helper()
	return newTestAPIWith(t, testAPIOptions{})
}

// testAPIOptions are what a test may change of a testAPI.
type testAPIOptions struct {
	dir             string // the store's directory; a new one when "" (testkit.StartWriter)
	writer          buffer.WriterOptions
	metricsReadings bool
}

// newTestAPIWith is newTestAPI with options.
func newTestAPIWith(t *testing.T, o testAPIOptions) *testAPI {
	t.Helper()
	s, w := testkit.StartWriter(t, buffer.Options{Dir: o.dir}, o.writer)
	log := slog.New(slog.DiscardHandler)
	api, err := New(Options{
		Store:           s,
		Writer:          w,
		Ingest:          gateway.NewIngester(w, gateway.IngesterOptions{Logger: log}),
		MQTT:            func() MQTTStatus { return MQTTStatus{} },
		MetricsReadings: o.metricsReadings,
		Started:         time.Now(),
		Registry:        NewRegistry(),
		Logger:          log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &testAPI{api: api, w: w}
}

// store writes readings through the Writer, as ingest does.
func (a *testAPI) store(t *testing.T, rs ...buffer.Reading) {
	t.Helper()
	ch := make(chan buffer.Result, 1)
	if err := a.w.Submit(context.Background(), rs, func(r buffer.Result) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	if res := <-ch; res.Err != nil || res.Stored != len(rs) {
		t.Fatalf("store: %+v", res)
	}
}

// get requests target (a path and query, escaped as a client sends it)
// and decodes the JSON answer into doc; it returns the status code.
func (a *testAPI) get(t *testing.T, target string, doc any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	a.api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if doc != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), doc); err != nil {
			t.Fatalf("GET %s: %d %s: %v", target, rec.Code, rec.Body, err)
		}
	}
	return rec.Code
}

// request sends a GET of target with the header lines given as name,
// value pairs, and returns the answer.
func (a *testAPI) request(target string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	a.api.ServeHTTP(rec, req)
	return rec
}

// unitTime is the time of the readings of the units tests.
var unitTime = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano()

type readingsDoc struct {
	Device   string            `json:"device"`
	Unit     *string           `json:"unit"`
	Units    map[string]string `json:"units"`
	Readings []struct {
		Metric string  `json:"metric"`
		Value  float64 `json:"value"`
	} `json:"readings"`
}

type statsDoc struct {
	Device string  `json:"device"`
	Metric string  `json:"metric"`
	Unit   *string `json:"unit"`
	Stats  []struct {
		Count uint64 `json:"count"`
	} `json:"stats"`
}

// Every answer about a metric says its unit, and leaves it out when none
// is known.
func TestAPI_Units(t *testing.T) {
	a := newTestAPI(t)
	a.store(t,
		buffer.Reading{Device: "kitchen", Metric: "t", TS: unitTime, Value: 21.5, Unit: "°C"},
		buffer.Reading{Device: "kitchen", Metric: "h", TS: unitTime, Value: 40, Unit: "%"},
		buffer.Reading{Device: "kitchen", Metric: "n", TS: unitTime, Value: 3},
		buffer.Reading{Device: "plain", Metric: "n", TS: unitTime, Value: 1},
	)

	var devs struct {
		Devices []struct {
			Device  string            `json:"device"`
			Metrics []string          `json:"metrics"`
			Units   map[string]string `json:"units"`
		} `json:"devices"`
	}
	if code := a.get(t, "/v1/devices", &devs); code != http.StatusOK || len(devs.Devices) != 2 {
		t.Fatalf("devices: %d %+v", code, devs)
	}
	if d := devs.Devices[0]; d.Device != "kitchen" || !reflect.DeepEqual(d.Metrics, []string{"h", "n", "t"}) ||
		!reflect.DeepEqual(d.Units, map[string]string{"h": "%", "t": "°C"}) {
		t.Errorf("kitchen: got %+v", d)
	}
	if d := devs.Devices[1]; d.Device != "plain" || d.Units != nil {
		t.Errorf("a device without units: got %+v, want no units", d)
	}

	var rd readingsDoc
	a.get(t, "/v1/devices/kitchen/readings?metric=t", &rd)
	if rd.Unit == nil || *rd.Unit != "°C" || rd.Units != nil || len(rd.Readings) != 1 {
		t.Errorf("readings of t: got %+v, want unit °C", rd)
	}
	rd = readingsDoc{}
	a.get(t, "/v1/devices/kitchen/readings?metric=n", &rd)
	if rd.Unit != nil || rd.Units != nil || len(rd.Readings) != 1 {
		t.Errorf("readings of n: got %+v, want no unit", rd)
	}
	rd = readingsDoc{}
	a.get(t, "/v1/devices/kitchen/readings", &rd)
	if rd.Unit != nil || !reflect.DeepEqual(rd.Units, map[string]string{"h": "%", "t": "°C"}) || len(rd.Readings) != 3 {
		t.Errorf("readings of every metric: got %+v, want the units of h and t", rd)
	}

	var st statsDoc
	a.get(t, "/v1/devices/kitchen/stats?metric=h&from=0", &st)
	if st.Unit == nil || *st.Unit != "%" || len(st.Stats) != 1 {
		t.Errorf("stats of h: got %+v, want unit %%", st)
	}
	st = statsDoc{}
	a.get(t, "/v1/devices/plain/stats?metric=n&from=0", &st)
	if st.Unit != nil || len(st.Stats) != 1 {
		t.Errorf("stats of n: got %+v, want no unit", st)
	}
}

// A device id is one path segment, percent-encoded where it must be:
// ServeMux routes kitchen%2Fdoor to the device kitchen/door, not to a
// path of more segments, and ids with spaces and accents work the same.
func TestAPI_DeviceIDsInPaths(t *testing.T) {
	a := newTestAPI(t)
	devices := []string{"kitchen/door", "living room", "café", "a/../b", "...", "50%", "x?y#z"}
	for i, d := range devices {
		a.store(t, buffer.Reading{Device: d, Metric: "température", TS: unitTime, Value: float64(i), Unit: "°C"})
	}
	for i, d := range devices {
		seg := url.PathEscape(d)
		var rd readingsDoc
		path := "/v1/devices/" + seg + "/readings?metric=" + url.QueryEscape("température")
		if code := a.get(t, path, &rd); code != http.StatusOK {
			t.Errorf("GET %s: %d %+v", path, code, rd)
			continue
		}
		if rd.Device != d || len(rd.Readings) != 1 || rd.Readings[0].Value != float64(i) || rd.Unit == nil || *rd.Unit != "°C" {
			t.Errorf("GET %s: got %+v, want the reading of %q", path, rd, d)
		}
		var st statsDoc
		path = "/v1/devices/" + seg + "/stats?from=0&metric=" + url.QueryEscape("température")
		if code := a.get(t, path, &st); code != http.StatusOK || st.Device != d || len(st.Stats) != 1 || st.Stats[0].Count != 1 {
			t.Errorf("GET %s: %d %+v", path, code, st)
		}
	}
	// The slash escaped is not a slash of the path: kitchen alone has no
	// readings, and kitchen/door/readings is no endpoint.
	for _, path := range []string{"/v1/devices/kitchen/readings", "/v1/devices/kitchen/door/readings"} {
		var e struct{ Error string }
		if code := a.get(t, path, &e); code != http.StatusNotFound {
			t.Errorf("GET %s: got %d %q, want 404", path, code, e.Error)
		}
	}
	// Pages go on after any device id.
	var devs struct {
		Devices []struct{ Device string }
		Next    string
	}
	var got []string
	for after := ""; ; after = devs.Next {
		devs.Next = ""
		if code := a.get(t, "/v1/devices?limit=2&after="+url.QueryEscape(after), &devs); code != http.StatusOK {
			t.Fatalf("devices after %q: %d", after, code)
		}
		for _, d := range devs.Devices {
			got = append(got, d.Device)
		}
		if devs.Next == "" {
			break
		}
	}
	want := []string{"...", "50%", "a/../b", "café", "kitchen/door", "living room", "x?y#z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("devices: got %q, want %q", got, want)
	}
	// What cannot be a name is refused.
	for _, path := range []string{"/v1/devices/a%01b/readings", "/v1/devices/a%ffb/readings", "/v1/devices/kitchen%2Fdoor/stats?from=0&metric=t%0A", "/v1/devices?after=a%00"} {
		var e struct{ Error string }
		if code := a.get(t, path, &e); code != http.StatusBadRequest {
			t.Errorf("GET %s: got %d %q, want 400", path, code, e.Error)
		}
	}
}
