package httpapi

import (
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
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

// TestAPI_StatesStatsMatchBruteForce writes a scripted sequence of states
// across minute, hour and day boundaries (late readings included, a
// checkpoint and a roll-up between batches) and asks /stats over real
// HTTP, for random whole-minute ranges and groups, for what a brute-force
// computation over the readings gives.
func TestAPI_StatesStatsMatchBruteForce(t *testing.T) {
	a := newTestAPI(t)
	srv := httptest.NewServer(a.api)
	defer srv.Close()
	rng := rand.New(rand.NewPCG(35, 1))
	now := time.Now()
	base := now.Truncate(time.Hour).Add(-30 * time.Hour)
	modes := []string{"heat", "cool", "off"}
	type reading struct {
		ts   int64
		mode string
	}
	var script []reading
	for ts := base.UnixNano(); ts < now.Add(-time.Hour).UnixNano(); ts += rng.Int64N(int64(50 * time.Minute)) {
		script = append(script, reading{ts, modes[rng.IntN(len(modes))]})
	}
	rng.Shuffle(len(script)/5, func(i, j int) { script[i], script[j] = script[j], script[i] }) // some late
	for len(script) > 0 {
		n := min(len(script), 1+rng.IntN(8))
		var rs []buffer.Reading
		for _, r := range script[:n] {
			rs = append(rs, buffer.Reading{Device: "hvac", Metric: "mode", TS: r.ts, Text: r.mode})
		}
		a.store(t, rs...)
		script = script[n:]
		if err := a.w.Checkpoint(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := a.w.RollUp(t.Context(), time.Unix(0, rs[0].TS)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := a.api.opts.Store.Readings(buffer.Query{Device: "hvac", Metric: "mode", From: math.MinInt64, To: math.MaxInt64, Limit: buffer.MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	// brute gives the time in each state within [from, to) at the time of
	// the request (asked as to ≤ the newest reading, or of a range before
	// the clock: now does not matter).
	brute := func(from, to int64) (count uint64, nanos map[string]uint64, unknown uint64) {
		nanos = map[string]uint64{}
		for i, r := range all {
			if r.TS >= from && r.TS < to {
				count++
			}
			end := int64(math.MaxInt64)
			if i+1 < len(all) {
				end = all[i+1].TS
			}
			if lo, hi := max(r.TS, from), min(end, to); hi > lo {
				nanos[r.Text] += uint64(hi - lo)
			}
		}
		if first := all[0].TS; first > from {
			unknown = uint64(min(first, to) - from)
		}
		return count, nanos, unknown
	}
	lo, hi := base.Add(-2*time.Hour).Truncate(time.Minute), time.Unix(0, all[len(all)-1].TS).Truncate(time.Minute)
	for range 12 {
		from := lo.Add(time.Duration(rng.Int64N(int64(hi.Sub(lo)/time.Minute))) * time.Minute)
		to := from.Add(time.Duration(1+rng.Int64N(int64(hi.Sub(from)/time.Minute))) * time.Minute)
		group := []string{"minute", "hour", "day", "all"}[rng.IntN(4)]
		q := url.Values{"metric": {"mode"}, "group": {group}, "from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
		resp, err := http.Get(srv.URL + "/v1/devices/hvac/stats?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var doc statesDoc
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", q.Encode(), resp.StatusCode, err)
		}
		// Each group against the brute force over its part of the range.
		groups := 0
		sumCount, sumNanos := uint64(0), map[string]uint64{}
		for _, g := range doc.Stats {
			sumCount += g.Count
			for _, s := range g.States {
				sumNanos[s.State] += s.Nanos
			}
			start, _ := time.Parse(time.RFC3339Nano, g.Start)
			gFrom, gTo := from, to
			if group != "all" {
				d := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[group]
				gFrom, gTo = maxTime(start, from), minTime(start.Add(d), to)
			}
			count, nanos, unknown := brute(gFrom.UnixNano(), gTo.UnixNano())
			got := map[string]uint64{}
			for _, s := range g.States {
				got[s.State] = s.Nanos
			}
			for k, v := range nanos {
				if v == 0 {
					delete(nanos, k)
				}
			}
			for k, v := range got {
				if v == 0 {
					delete(got, k)
				}
			}
			if g.Count != count || g.UnknownNanos != unknown || !reflect.DeepEqual(got, nanos) {
				t.Errorf("%s: group %s: count %d, %v, unknown %d; want %d, %v, %d", q.Encode(), g.Start, g.Count, got, g.UnknownNanos, count, nanos, unknown)
			}
			groups++
		}
		if groups == 0 {
			t.Errorf("%s: no group", q.Encode())
		}
		// No group left out: together they are the whole range's.
		count, nanos, _ := brute(from.UnixNano(), to.UnixNano())
		for k, v := range nanos {
			if v == 0 {
				delete(nanos, k)
			}
		}
		for k, v := range sumNanos {
			if v == 0 {
				delete(sumNanos, k)
			}
		}
		if sumCount != count || !reflect.DeepEqual(sumNanos, nanos) {
			t.Errorf("%s: the groups add up to %d readings, %v; the range has %d, %v", q.Encode(), sumCount, sumNanos, count, nanos)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func TestSeconds_Exact(t *testing.T) {
	for ns, want := range map[uint64]string{
		0:                    "0",
		1:                    "0.000000001",
		1541334138:           "1.541334138",
		1986711345399:        "1986.711345399",
		7200e9:               "7200",
		12668016000000:       "12668.016",
		18446744073709551615: "18446744073.709551615",
	} {
		if got := seconds(ns).String(); got != want {
			t.Errorf("seconds(%d) = %s, want %s", ns, got, want)
		}
		if b, _ := seconds(ns).MarshalJSON(); string(b) != want {
			t.Errorf("seconds(%d) as JSON = %s, want %s", ns, b, want)
		}
	}
}
