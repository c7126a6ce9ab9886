package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

type statesDoc struct {
	Device string `json:"device"`
	Metric string `json:"metric"`
	Group  string `json:"group"`
	Stats  []struct {
		Start  string `json:"start"`
		Count  uint64 `json:"count"`
		States []struct {
			State   string  `json:"state"`
			Count   uint64  `json:"count"`
			Seconds float64 `json:"seconds"`
			Nanos   uint64  `json:"nanoseconds"`
		} `json:"states"`
		UnknownSeconds float64 `json:"unknown_seconds"`
		UnknownNanos   uint64  `json:"unknown_nanoseconds"`
	} `json:"stats"`
}

// The stats of a text series over real HTTP: per group its readings and
// per state its readings and time (a state lasts until the series' next
// reading), and the time before the first reading as unknown; a late
// reading written after a checkpoint counts as if it had come in time.
func TestAPI_StatesStats(t *testing.T) {
	a := newTestAPI(t)
	srv := httptest.NewServer(a.api)
	defer srv.Close()
	base := time.Now().Truncate(time.Hour).Add(-48 * time.Hour)
	at := func(d time.Duration) int64 { return base.Add(d).UnixNano() }
	a.store(t,
		buffer.Reading{Device: "hvac", Metric: "mode", TS: at(0), Text: "heat"},
		buffer.Reading{Device: "hvac", Metric: "mode", TS: at(10*time.Minute + 250*time.Millisecond), Text: "off"},
		buffer.Reading{Device: "hvac", Metric: "mode", TS: at(25*time.Hour + 30*time.Second), Text: "cool"},
	)
	if err := a.w.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.store(t, buffer.Reading{Device: "hvac", Metric: "mode", TS: at(70 * time.Minute), Text: "heat"}) // late
	type st struct {
		State string
		Count uint64
		Nanos uint64
	}
	type group struct {
		Start   time.Duration
		Count   uint64
		States  []st
		Unknown uint64
	}
	mn := uint64(time.Minute)
	for _, tt := range []struct {
		from, to time.Duration
		group    string
		want     []group
	}{
		{0, 25 * time.Hour, "all", []group{{0, 3, []st{{"heat", 2, 24*60*mn + 250e6}, {"off", 1, 60*mn - 250e6}}, 0}}},
		{-time.Hour, time.Hour, "all", []group{{-time.Hour, 2, []st{{"heat", 1, 10*mn + 250e6}, {"off", 1, 50*mn - 250e6}}, 60 * mn}}},
		{0, 3 * time.Hour, "hour", []group{
			{0, 2, []st{{"heat", 1, 10*mn + 250e6}, {"off", 1, 50*mn - 250e6}}, 0},
			{time.Hour, 1, []st{{"heat", 1, 50 * mn}, {"off", 0, 10 * mn}}, 0},
			{2 * time.Hour, 0, []st{{"heat", 0, 60 * mn}}, 0},
		}},
		{25 * time.Hour, 25*time.Hour + 2*time.Minute, "minute", []group{
			{25 * time.Hour, 1, []st{{"heat", 0, 30e9}, {"cool", 1, 30e9}}, 0},
			{25*time.Hour + time.Minute, 0, []st{{"cool", 0, mn}}, 0},
		}},
	} {
		q := url.Values{"metric": {"mode"}, "group": {tt.group},
			"from": {base.Add(tt.from).Format(time.RFC3339Nano)}, "to": {base.Add(tt.to).Format(time.RFC3339Nano)}}
		resp, err := http.Get(srv.URL + "/v1/devices/hvac/stats?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc statesDoc
		if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s %v", q.Encode(), resp.StatusCode, body, err)
		}
		var got []group
		for _, g := range doc.Stats {
			start, err := time.Parse(time.RFC3339Nano, g.Start)
			if err != nil {
				t.Fatal(err)
			}
			gg := group{Start: start.Sub(base), Count: g.Count, Unknown: g.UnknownNanos}
			if g.UnknownSeconds != float64(g.UnknownNanos)/1e9 {
				t.Errorf("%s: unknown %v s, %d ns", q.Encode(), g.UnknownSeconds, g.UnknownNanos)
			}
			for _, s := range g.States {
				gg.States = append(gg.States, st{s.State, s.Count, s.Nanos})
				if s.Seconds != float64(s.Nanos)/1e9 {
					t.Errorf("%s: %s: %v s, %d ns", q.Encode(), s.State, s.Seconds, s.Nanos)
				}
			}
			got = append(got, gg)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", q.Encode(), got, tt.want)
		}
	}
	// A bad query is a 400 with its reason, as for numbers.
	resp, err := http.Get(srv.URL + "/v1/devices/hvac/stats?metric=mode&group=week")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "group: must be minute, hour, day or all") {
		t.Errorf("group=week: %d %s", resp.StatusCode, body)
	}
	// CSV: a row per group and state, the state quoted as texts are.
	rec := a.request("/v1/devices/hvac/stats?metric=mode&group=all&format=csv&from=" +
		url.QueryEscape(base.Format(time.RFC3339)) + "&to=" + url.QueryEscape(base.Add(25*time.Hour).Format(time.RFC3339)))
	want := "start,count,state,state_count,seconds,unknown_seconds\n" +
		base.UTC().Format(time.RFC3339Nano) + ",3,\"heat\",2,86400.25,0\n" +
		base.UTC().Format(time.RFC3339Nano) + ",3,\"off\",1,3599.75,0\n"
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("CSV: %d\n%s\nwant\n%s", rec.Code, rec.Body, want)
	}
}
