package gateway

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// clockLog is a Clock that keeps what the Ingester tells it.
type clockLog struct {
	mu       sync.Mutex
	now      time.Time
	observed []time.Duration // device time minus receive time
	stamped  []time.Time
}

func (c *clockLog) Now() time.Time { return c.now }
func (c *clockLog) Trusted() bool  { return false }
func (c *clockLog) Observe(ts, recv time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed = append(c.observed, ts.Sub(recv))
}

func (c *clockLog) Stamped(recv time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamped = append(c.stamped, recv)
	return nil
}

// TestIngest_TellsTheClockWhichTimesAreItsOwn: a device's own timestamp
// is observed (to judge the clock by); a time stamped with the receive
// time, or relative to it (SenML), is recorded as the clock's, and never
// observed: it would make any clock agree with itself.
func TestIngest_TellsTheClockWhichTimesAreItsOwn(t *testing.T) {
	_, w := testkit.StartWriter(t, buffer.Options{}, buffer.WriterOptions{})
	route := func(pattern string, f payload.Format) Route {
		p, err := ParsePattern(pattern)
		if err != nil {
			t.Fatal(err)
		}
		return Route{Pattern: p, Route: payload.Route{Format: f}}
	}
	recv := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, topic, payload string
		observed             []time.Duration
		stamped              []time.Time
	}{
		{"own timestamp", "json/d", `{"ts":1764072000000,"t":1}`, []time.Duration{time.Date(2025, 11, 25, 12, 0, 0, 0, time.UTC).Sub(recv)}, nil},
		{"no timestamp", "json/d", `{"t":1}`, nil, []time.Time{recv}},
		{"before 2000: restamped", "json/d", `{"ts":315532800,"t":1}`, nil, []time.Time{recv}},
		{"SenML relative", "senml/d", `[{"n":"t","v":1,"t":-60},{"n":"t","v":2,"t":-5}]`, nil, []time.Time{recv.Add(-time.Minute), recv.Add(-5 * time.Second)}},
		{"SenML absolute", "senml/d", `[{"n":"t","v":1,"t":1764072000}]`, []time.Duration{time.Date(2025, 11, 25, 12, 0, 0, 0, time.UTC).Sub(recv)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clockLog{now: recv}
			in := NewIngester(w, IngesterOptions{Clock: clk, Routes: []Route{
				route("json/{device}", payload.FormatJSON), route("senml/{device}", payload.FormatSenML)}})
			errc := make(chan error, 1)
			if !in.Ingest(context.Background(), tc.topic, []byte(tc.payload), in.Now(), func(err error) { errc <- err }) {
				t.Fatal("no route")
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if st := in.Stats(); st.Stored+st.Duplicates == 0 || st.Rejected != 0 {
				t.Fatalf("stats %+v", st)
			}
			if !slices.Equal(clk.observed, tc.observed) || !slices.EqualFunc(clk.stamped, tc.stamped, time.Time.Equal) {
				t.Errorf("observed %v, stamped %v; want %v, %v", clk.observed, clk.stamped, tc.observed, tc.stamped)
			}
		})
	}
}
