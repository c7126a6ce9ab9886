package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-gateway/cairn/gateway"
)

// floodConfig is the default configuration, limits on series and the auto
// memory limit included, with the embedded broker on a port picked at
// each start.
const floodConfig = localConfig

// floodPayload is a flat JSON object of n new metric names, from first
// on: about 15 bytes each (3,800 make 56.6 KB).
func floodPayload(first, n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%06d":%d.5`, first+i, i%100)
	}
	b.WriteByte('}')
	return b.String()
}

// seriesDoc is the part of /v1/status the flood test reads.
type seriesDoc struct {
	Ingest struct {
		Stored   uint64              `json:"stored"`
		Refused  uint64              `json:"refused_readings"`
		ByReason map[string]uint64   `json:"rejected_by_reason"`
		Examples []gateway.Rejection `json:"recent_rejections"`
	} `json:"ingest"`
	Store struct {
		Series             int `json:"series"`
		MaxSeries          int `json:"max_series"`
		MaxSeriesPerDevice int `json:"max_series_per_device"`
	} `json:"store"`
}

// A flood of new metric names, from one device and then from many, with
// the default limits: each device stops at 1,000 series and the store at
// 20,000, the readings over them are refused, counted and shown, the
// others stored, and the gateway stays under 100 MiB of resident memory,
// before and after a restart on the same data.
func TestRun_SeriesFlood(t *testing.T) {
	const (
		perMessage = 3800 // new names a message: about 58 KB
		maxRSS     = 100 << 10
	)
	bin := cairnBinary.get(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, floodConfig)
	env := []string{"GOMEMLIMIT="} // TestMain's "off" would turn the auto limit off
	p := startCairnEnv(t, bin, cfg, env)
	api := newAPIClient(p.http)
	pub := mustConnect(t, p.mqtt, "flood")
	defer pub.Disconnect(0)
	status := func() seriesDoc {
		t.Helper()
		var st seriesDoc
		if code := api.get(t, "/v1/status", &st); code != 200 {
			t.Fatalf("GET /v1/status: %d", code)
		}
		return st
	}
	checkRSS := func(when string) {
		t.Helper()
		if !p.Running() {
			t.Fatalf("cairn exited %s: %v\n%s", when, p.Err(), p.out)
		}
		cur, peak, err := rss(p.Cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: VmRSS %.1f MiB, VmHWM %.1f MiB", when, float64(cur)/1024, float64(peak)/1024)
		if cur > maxRSS || peak > maxRSS {
			t.Errorf("%s: VmRSS %d KiB, VmHWM %d KiB, want both under %d KiB", when, cur, peak, maxRSS)
		}
	}

	// A sensor with two metrics, before the flood.
	if err := publish1(pub, "sensors/normal/telemetry", `{"temp":21.5,"hum":40}`); err != nil {
		t.Fatal(err)
	}
	// (a) One device, 50 messages of 3,800 new names each.
	sent := 2
	for i := range 50 {
		if err := publish1(pub, "sensors/flood-one/telemetry", floodPayload(i*perMessage, perMessage)); err != nil {
			t.Fatal(err)
		}
		sent += perMessage
	}
	st := status()
	if st.Store.Series != 1002 || st.Store.MaxSeriesPerDevice != 1000 || st.Store.MaxSeries != defaultMaxSeries {
		t.Fatalf("after one device's flood: %d series, limits %d a device and %d in all; want 1002, 1000, %d", st.Store.Series, st.Store.MaxSeriesPerDevice, st.Store.MaxSeries, defaultMaxSeries)
	}
	if got := st.Ingest.ByReason[gateway.ReasonTooManySeries]; got != 50 {
		t.Errorf("too_many_series: got %d messages, want 50", got)
	}
	if want := `device "flood-one" has 1000 series (store.max_series_per_device); metric "m`; len(st.Ingest.Examples) == 0 || !strings.Contains(st.Ingest.Examples[0].Detail, want) {
		t.Errorf("recent rejections %+v, want the newest to say %q", st.Ingest.Examples, want)
	}
	checkRSS("after 50 messages of 3,800 new names from one device")

	// (b) Many devices, one message of 1,200 new names each, until the
	// store is full: 19 take 1,000 series each, the last ones none.
	for d := range 30 {
		if err := publish1(pub, fmt.Sprintf("sensors/flood-%02d/telemetry", d), floodPayload(0, 1200)); err != nil {
			t.Fatal(err)
		}
		sent += 1200
	}
	// The sensor of before still has its readings stored; a new one is
	// refused.
	if err := publish1(pub, "sensors/normal/telemetry", `{"temp":21.6,"hum":41}`); err != nil {
		t.Fatal(err)
	}
	if err := publish1(pub, "sensors/late/telemetry", `{"temp":20}`); err != nil {
		t.Fatal(err)
	}
	sent += 3
	st = status()
	if st.Store.Series != defaultMaxSeries {
		t.Errorf("after many devices' flood: %d series, want %d", st.Store.Series, defaultMaxSeries)
	}
	if got := st.Ingest.ByReason[gateway.ReasonTooManySeries]; got != 50+30+1 {
		t.Errorf("too_many_series: got %d messages, want 81", got)
	}
	if want := `the store has 20000 series (store.max_series); device "late" metric "temp" refused`; len(st.Ingest.Examples) == 0 || !strings.HasSuffix(st.Ingest.Examples[0].Detail, want) {
		t.Errorf("recent rejections %+v, want the newest to say %q", st.Ingest.Examples, want)
	}
	if st.Ingest.Stored+st.Ingest.Refused != uint64(sent) || st.Ingest.Stored != defaultMaxSeries+2 {
		t.Errorf("%d readings stored and %d refused of %d sent, want %d stored", st.Ingest.Stored, st.Ingest.Refused, sent, defaultMaxSeries+2)
	}
	var normal readingsDoc
	api.get(t, "/v1/devices/normal/readings", &normal)
	if len(normal.Readings) != 4 {
		t.Errorf("normal sensor: %d readings, want 4", len(normal.Readings))
	}
	checkRSS("after many devices' flood")

	// Every device, a page of 7 at a time.
	devices, metrics := 0, 0
	for after, pages := "", 0; ; pages++ {
		var page struct {
			Devices []struct {
				Device  string   `json:"device"`
				Metrics []string `json:"metrics"`
			} `json:"devices"`
			Next string `json:"next"`
		}
		if code := api.get(t, "/v1/devices?limit=7&after="+after, &page); code != 200 || pages > 10 {
			t.Fatalf("GET /v1/devices after %q: %d (page %d)", after, code, pages)
		}
		for _, d := range page.Devices {
			devices++
			metrics += len(d.Metrics)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if devices != 21 || metrics != defaultMaxSeries {
		t.Errorf("/v1/devices: %d devices with %d metrics, want 21 with %d", devices, metrics, defaultMaxSeries)
	}

	// Restarted on the same data: the same series, still under the
	// limits, in as little memory.
	pub.Disconnect(250)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out)
	}
	p = startCairnEnv(t, bin, cfg, env)
	api = newAPIClient(p.http)
	if st := status(); st.Store.Series != defaultMaxSeries {
		t.Errorf("restarted: %d series, want %d", st.Store.Series, defaultMaxSeries)
	}
	pub = mustConnect(t, p.mqtt, "flood")
	defer pub.Disconnect(0)
	if err := publish1(pub, "sensors/flood-00/telemetry", floodPayload(5000, 10)); err != nil {
		t.Fatal(err)
	}
	if st := status(); st.Store.Series != defaultMaxSeries || st.Ingest.Refused != 10 {
		t.Errorf("restarted, 10 new names: %d series and %d readings refused, want %d and 10", st.Store.Series, st.Ingest.Refused, defaultMaxSeries)
	}
	checkRSS("restarted")
}
