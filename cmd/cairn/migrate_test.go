package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// storeFixture is what testdata/store-vN.json says the data directory of
// store-vN.tar.gz holds (scripts/fixture/storev4 writes both).
type storeFixture struct {
	Readings uint64               `json:"readings"` // distinct readings stored
	Gateway  string               `json:"gateway_id"`
	LastSeen map[string]time.Time `json:"last_seen"` // by device, before the kill
	Series   []struct {
		Device   string           `json:"device"`
		Metric   string           `json:"metric"`
		Unit     string           `json:"unit"` // "": none
		Readings []fixtureReading `json:"readings"`
	} `json:"series"`
}

// fixtureReading is a reading of a store fixture: [time, value, state].
type fixtureReading struct {
	TS    time.Time
	Value float64
	State string // sent, in_flight, queued or journal
}

func (r *fixtureReading) UnmarshalJSON(b []byte) error {
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 3 {
		return fmt.Errorf("reading %s: want [time, value, state]", b)
	}
	for i, v := range []any{&r.TS, &r.Value, &r.State} {
		if err := json.Unmarshal(a[i], v); err != nil {
			return fmt.Errorf("reading %s: %w", b, err)
		}
	}
	return nil
}

// sent reports whether the upstream took the reading before the store was
// left: it need not be sent again.
func (r fixtureReading) sent() bool { return r.State == "sent" }

func loadStoreFixture(t *testing.T, path string) storeFixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx storeFixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := 0
	for _, s := range fx.Series {
		n += len(s.Readings)
	}
	if uint64(n) != fx.Readings || n == 0 {
		t.Fatalf("%s: %d readings listed, %d said", path, n, fx.Readings)
	}
	return fx
}

// untarFixture unpacks a gzipped tar into dir.
func untarFixture(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("%s: entry %q is outside the directory", path, hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, hdr.FileInfo().Mode().Perm())
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, hdr.FileInfo().Mode().Perm())
			}
		default:
			err = fmt.Errorf("entry %q: type %c", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// migrateConfig keeps everything for ever (the fixture's readings age) and
// sends to %URL% as the gateway that wrote the fixture.
const migrateConfig = localConfig + `retention:
  raw_max_age: 0
  minute_stats_max_age: 0
  hour_stats_max_age: 0
  day_stats_max_age: 0
uplink:
  url: %URL%
  gateway_id: %GATEWAY%
  interval: 100ms
  retry_wait_min: 100ms
  retry_wait_max: 1s
`

// migrationMsg matches the message of a log line about converting an
// older store.
var migrationMsg = regexp.MustCompile(`(?i)migrat|keyspace|moved the outbox`)

// logMsg returns the message of a log line (text format), "" if none.
func logMsg(line string) string {
	if m := logMsgRE.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

var logMsgRE = regexp.MustCompile(`\bmsg=("(?:[^"\\]|\\.)*"|\S+)`)

// TestMigrate_StoreFromRelease starts `cairn run` on a data directory
// that the cairn of keyspace version 4 wrote and was killed in
// (testdata/store-v4.tar.gz; store-v4.json says what it holds, and
// scripts/fixture/make-store-v4.sh how it was made): readings sent, a
// batch in flight to an upstream that never answered, readings queued
// behind it, readings acknowledged and only in the journal, sealed
// buckets, open runs, minute, hour and day records, units, heard times.
// With its uplink to a real VictoriaMetrics, every reading must be
// there once with its unit, the aggregates must agree with the readings,
// and every reading not sent before the kill must reach the upstream
// once. Then it is killed and started again, and nothing may change.
func TestMigrate_StoreFromRelease(t *testing.T) {
	fx := loadStoreFixture(t, "testdata/store-v4.json")
	root := t.TempDir()
	untarFixture(t, "testdata/store-v4.tar.gz", root)
	dataDir := filepath.Join(root, "data")
	vm := newVictoriaMetrics(t)
	vm.start(t)
	cfg := writeConfig(t, dataDir, strings.NewReplacer("%URL%", vm.writeURL(), "%GATEWAY%", fx.Gateway).Replace(migrateConfig))

	p := startCairn(t, cairnBinary.get(t), cfg)
	if p.readings != fx.Readings {
		t.Errorf("started with %d readings, want the fixture's %d", p.readings, fx.Readings)
	}
	said := slices.DeleteFunc(p.out.Matching(""), func(l string) bool {
		msg := logMsg(l)
		return !migrationMsg.MatchString(msg) && !strings.Contains(msg, "journal")
	})
	if len(said) == 0 {
		t.Errorf("the first start does not say what it did with the journal and outbox the store had; log:\n%s", p.out)
	}
	for _, l := range said {
		t.Logf("first start: %s", l)
	}
	api := newAPIClient(p.http)
	checkFixtureStore(t, api, fx)
	waitSent(t, api)
	checkFixtureUpstream(t, vm, fx)
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited 0 on SIGKILL")
	}

	p = startCairn(t, cairnBinary.get(t), cfg)
	if slices.ContainsFunc(p.out.Matching(""), func(l string) bool { return migrationMsg.MatchString(logMsg(l)) }) {
		t.Errorf("the second start converts the store again; log:\n%s", p.out)
	}
	if p.readings != fx.Readings {
		t.Errorf("restarted with %d readings, want the fixture's %d", p.readings, fx.Readings)
	}
	api = newAPIClient(p.http)
	checkFixtureStore(t, api, fx)
	waitSent(t, api)
	checkFixtureUpstream(t, vm, fx)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
	if _, counted := storedReadings(t, dataDir); counted != fx.Readings {
		t.Errorf("the store counts %d readings, want %d", counted, fx.Readings)
	}
	checkAggregates(t, dataDir)
}

// checkFixtureStore checks, through the API, that the store holds the
// fixture's readings, each once, with its series' unit; that its stats by
// minute, hour, day and in all are those of the readings; and that each
// device was last heard when the fixture says, to the minute.
func checkFixtureStore(t *testing.T, api *apiClient, fx storeFixture) {
	t.Helper()
	st := api.status(t)
	if st.Store.Readings != fx.Readings || st.Store.Series != len(fx.Series) {
		t.Errorf("status: %d readings in %d series, want %d in %d", st.Store.Readings, st.Store.Series, fx.Readings, len(fx.Series))
	}
	for _, s := range fx.Series {
		path := "/v1/devices/" + url.PathEscape(s.Device) + "/readings?order=asc&limit=10000&from=0&metric=" + url.QueryEscape(s.Metric)
		var doc struct {
			Unit     string       `json:"unit"`
			Readings []readingDoc `json:"readings"`
		}
		if code := api.get(t, path, &doc); code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		if doc.Unit != s.Unit {
			t.Errorf("%s/%s: unit %q, want %q", s.Device, s.Metric, doc.Unit, s.Unit)
		}
		var got, want []string
		for _, r := range doc.Readings {
			got = append(got, fmt.Sprintf("%s %v", r.TS, r.Value))
		}
		for _, r := range s.Readings {
			want = append(want, fmt.Sprintf("%s %v", r.TS.UTC().Format(time.RFC3339Nano), r.Value))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s/%s: %d readings, want %d: %s", s.Device, s.Metric, len(got), len(want), listDiff(got, want))
		}
		checkFixtureStats(t, api, s.Device, s.Metric, s.Readings)
	}
	var devices struct {
		Devices []struct {
			Device   string    `json:"device"`
			LastSeen time.Time `json:"last_seen"`
		} `json:"devices"`
	}
	api.get(t, "/v1/devices", &devices)
	if len(devices.Devices) != len(fx.LastSeen) {
		t.Errorf("%d devices, want %d", len(devices.Devices), len(fx.LastSeen))
	}
	for _, d := range devices.Devices {
		want := fx.LastSeen[d.Device]
		if d.LastSeen.After(want) || !d.LastSeen.After(want.Add(-time.Minute)) {
			t.Errorf("%s: last seen %s, want in the minute up to %s", d.Device, d.LastSeen, want)
		}
	}
}

// checkFixtureStats compares the stats API's answers for the series with
// aggregates of its readings, by minute, hour and day, and over the whole
// range.
func checkFixtureStats(t *testing.T, api *apiClient, device, metric string, rs []fixtureReading) {
	t.Helper()
	first, last := rs[0].TS, rs[0].TS
	for _, r := range rs {
		first, last = minTime(first, r.TS), maxTime(last, r.TS)
	}
	from, to := first.Truncate(24*time.Hour), last.Truncate(24*time.Hour).Add(24*time.Hour)
	for _, g := range []struct {
		group string
		size  time.Duration
	}{{"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}, {"all", to.Sub(from)}} {
		want := map[string]*aggregate.Stats{}
		for _, r := range rs {
			start := from.Add(r.TS.Sub(from).Truncate(g.size)).Format(time.RFC3339)
			if want[start] == nil {
				want[start] = new(aggregate.Stats)
			}
			want[start].Add(r.Value)
		}
		path := fmt.Sprintf("/v1/devices/%s/stats?metric=%s&group=%s&from=%d&to=%d",
			url.PathEscape(device), url.QueryEscape(metric), g.group, from.Unix(), to.Unix())
		var doc statsDoc
		if code := api.get(t, path, &doc); code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		if len(doc.Stats) != len(want) {
			t.Errorf("%s/%s by %s: %d groups, want %d", device, metric, g.group, len(doc.Stats), len(want))
		}
		for _, s := range doc.Stats {
			got := aggregate.Stats{Count: s.Count, Sum: s.Sum, Min: s.Min, Max: s.Max, SumSqr: s.SumSqr}
			if w := want[s.Start]; w == nil || !closeStats(got, *w) {
				t.Errorf("%s/%s by %s at %s: got %+v, want %+v", device, metric, g.group, s.Start, got, w)
			}
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// listDiff says how two sorted lists differ, with a few examples.
func listDiff(got, want []string) string {
	count := map[string]int{}
	for _, s := range want {
		count[s]++
	}
	for _, s := range got {
		count[s]--
	}
	var ex []string
	for s, n := range count {
		switch {
		case n > 0:
			ex = append(ex, fmt.Sprintf("missing %q ×%d", s, n))
		case n < 0:
			ex = append(ex, fmt.Sprintf("extra %q ×%d", s, -n))
		}
	}
	slices.Sort(ex)
	if len(ex) > 8 {
		ex = append(ex[:8], "…")
	}
	return strings.Join(ex, "; ")
}

// checkFixtureUpstream checks that VictoriaMetrics holds every reading of
// the fixture that was not sent before the kill exactly once, with its
// unit, under the fixture's gateway; a reading sent before may be there,
// once at most; nothing else may.
func checkFixtureUpstream(t *testing.T, vm *victoriaMetrics, fx storeFixture) {
	t.Helper()
	got := vmSamples(t, vm)
	var missing []string
	unsent := 0
	for _, s := range fx.Series {
		for _, r := range s.Readings {
			k := fmt.Sprintf("%s %s %s %s unit=%q %v", fx.Gateway, s.Device, s.Metric, r.TS.UTC().Format(time.RFC3339Nano), s.Unit, r.Value)
			n := got[k]
			delete(got, k)
			switch {
			case r.sent() && n <= 1:
			case !r.sent() && n == 1:
				unsent++
			default:
				missing = append(missing, fmt.Sprintf("%s (%s) ×%d", k, r.State, n))
			}
		}
	}
	for k, n := range got {
		missing = append(missing, fmt.Sprintf("%s ×%d, which the fixture does not hold", k, n))
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("upstream: %d readings not as they should be, e.g.\n%s", len(missing), strings.Join(missing[:min(len(missing), 10)], "\n"))
	}
	t.Logf("upstream holds the %d readings not sent before the kill", unsent)
}

// vmSamples returns how many times VictoriaMetrics holds each sample, as
// "gateway device metric time unit=… value".
func vmSamples(t *testing.T, vm *victoriaMetrics) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range vm.export(t, url.Values{"match[]": {`{__name__=~"readings_.+"}`}, "start": {"0"}}) {
		m := line.Metric
		for i, ts := range line.Timestamps {
			out[fmt.Sprintf("%s %s %s %s unit=%q %v", m["gateway"], m["device"], strings.TrimPrefix(m["__name__"], "readings_"),
				time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), m["unit"], line.Values[i])]++
		}
	}
	return out
}
