package dashboard

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// hostile are values that the page must escape, in every place a
// string goes: markup, quotes, URL delimiters and escapes, spaces,
// emoji, invalid UTF-8, NUL, noncharacters, schemes and empty.
var hostile = []string{
	`<script>alert("x")</script>`, `a'b"c`, `a&b&amp;`, `50% %zz %41 ends%4`, `a#b?c=d`, `a b+c`,
	"🌡️ temp", "caf\xc3\xa9", "bad\xff\xfe utf-8", "nul\x00byte", "\uFFFD\ufdd0\uffff", "javascript:alert(1)",
	"/?x=1&y=2", "tab\tline\nbreak\r", "",
}

type pageCase struct {
	name string
	page Page
}

// pageCases are the pages the golden files hold: every state the page
// tests build, and the hostile values in each place.
func pageCases() []pageCase {
	var cs []pageCase
	add := func(name string, p Page) { cs = append(cs, pageCase{name, p}) }

	add("empty", Page{})
	add("empty_now", Page{Now: end})
	add("sections_7d", testPage(20, 2, Range7d, true))
	add("raw_1h", testPage(3, 1, Range1h, true))
	add("90d", testPage(4, 1, Range90d, true))
	add("no_charts", testPage(12, 7, Range24h, false))

	p := testPage(3, 2, Range1h, true)
	evil := `<script>alert("x")</script>`
	p.Devices[1].ID = evil
	p.Devices[1].Metrics[0].Name = `<img src=x onerror=alert(1)>`
	p.Devices[1].Metrics[0].Unit = `"><b>unit`
	p.Device = evil
	p.Charts[0].Title = evil
	p.Charts[0].Unit = `"><b>unit`
	p.Health.RecentRejections[0].Topic = evil
	p.Health.RecentUnmatched[0].Topic = evil
	p.Health.Paused = evil
	add("escapes_names", p)

	p = testPage(3, 5, Range90d, true)
	p.ChartPages = ChartPages{Metrics: 1000, Matching: 100, Filter: "<b>", Page: 2, PerPage: 5}
	p.Charts = p.Charts[:2]
	p.Devices[0].More = 995
	p.Devices[1].More = 1
	p.Devices[2].More = -3
	add("chart_pages", p)
	p.ChartPages = ChartPages{Metrics: 12, Matching: 12, Page: 3, PerPage: 5}
	add("chart_pages_last", p)
	p.ChartPages = ChartPages{Metrics: 12, Matching: 12, Page: 1, PerPage: 5}
	add("chart_pages_first", p)
	p.ChartPages, p.Charts = ChartPages{Metrics: 12, Filter: "zzz", Page: 1, PerPage: 5}, nil
	add("chart_pages_no_match", p)
	p.ChartPages = ChartPages{Metrics: 1, Matching: 1, Filter: "a b+c&d", Page: 2, PerPage: 1}
	add("chart_pages_one", p)
	p.ChartPages = ChartPages{}
	add("no_metric", p)

	p = testPage(1, 1, Range24h, false)
	h := &p.Health
	h.MQTT.Clients, h.Unmatched, h.Store.Readings, h.Uplinks[0].Pending, h.Retention.Removed = 1, 1, 1, 1, 1
	h.Stored = 1
	add("counts_one", p)
	p = testPage(2, 1, Range24h, false)
	h = &p.Health
	h.MQTT.Clients, h.Unmatched, h.Store.Readings, h.Uplinks[0].Pending, h.Retention.Removed = 0, 2, 1234, 2, 0
	h.Stored, h.Rejected, h.ByReason, h.RecentRejections, h.RecentUnmatched = 1000, 0, nil, nil, nil
	add("counts_many", p)

	const mib = 1 << 20
	for _, l := range []struct {
		limit string
		eff   int64
	}{{"max_disk_bytes", 100 * mib}, {"free_space", 40 * mib}, {"reserve", 20 * mib}, {"", 0}, {"other", 1}} {
		add("store_limit_"+l.limit, Page{Now: end, Health: Health{Store: Store{DiskBytes: 38 * mib, MaxDiskBytes: 100 * mib, Limit: l.limit, EffectiveMaxDiskBytes: l.eff}}})
	}
	add("store_odd", Page{Now: end, Health: Health{Store: Store{DiskBytes: -5, MaxDiskBytes: 3, FreeBytes: 1 << 62, Series: -1}}})

	p = testPage(1, 1, Range24h, false)
	u := &p.Health.Uplinks[0]
	u.LastError, u.LastErrorAt, u.LastSuccess = "503 Service Unavailable", end.Add(-10*time.Second), end.Add(-time.Minute)
	u.NextAttempt = end.Add(30 * time.Second)
	add("uplink_failing", p)
	u.LastSuccess, u.NextAttempt = end.Add(-time.Second), time.Time{}
	add("uplink_error_past", p)
	p.Health.Uplinks = []Uplink{{Name: "vm", LastSuccess: end.Add(-time.Second)},
		{Name: "central", Pending: 7, LastError: "503 Service Unavailable", LastErrorAt: end.Add(-time.Second)}, {Name: "default"}}
	add("uplinks", p)
	p.Health.Uplinks = nil
	p.Health.Retention = nil
	add("uplink_off_no_retention", p)
	p.Health.Retention = &Retention{LastRun: end.Add(-time.Minute), NextRun: end.Add(time.Minute), Removed: 12345, DroppedUnsent: 1, OldestReading: end.Add(-90 * day)}
	add("retention_running", p)

	p = testPage(2, 3, Range24h, false)
	p.Health.MQTT = MQTT{Mode: "external", Address: "tcp://broker:1883", LastError: "connection refused", LastErrorAt: end.Add(-3 * time.Minute)}
	p.Refresh, p.QuietAfter, p.Version, p.Title = 0, 0, "", "hall & co"
	add("external_down", p)
	p.Health.MQTT = MQTT{Mode: "external", Connected: true}
	p.Health.IngestRate = 0.05
	add("external_up", p)
	p.Health.MQTT = MQTT{Mode: "embedded", Clients: 1}
	p.Health.IngestRate = math.NaN()
	add("embedded_one_client", p)

	p = Page{Now: end, QuietAfter: 15 * time.Minute, Devices: []Device{
		{ID: "old-clock", LastSeen: end.Add(-5 * time.Second), Newest: time.Date(2020, 2, 12, 15, 15, 46, 0, time.UTC)},
		{ID: "on-time", LastSeen: end.Add(-5 * time.Second), Newest: end.Add(-6 * time.Second)},
		{ID: "ahead", LastSeen: end.Add(-5 * time.Second), Newest: end.Add(time.Hour)},
		{ID: "silent", LastSeen: end.Add(-time.Hour), Newest: end.Add(-time.Hour)},
		{ID: "never"},
		{ID: "values", LastSeen: end, Metrics: []Metric{
			{Name: "none", Unit: "V"}, {Name: "mode", Text: "heat", Unit: "x", Time: end}, {Name: "big", Value: 1e6, Unit: "Wh", Time: end},
			{Name: "nan", Value: math.NaN(), Time: end}, {Name: "inf", Value: math.Inf(1), Time: end}, {Name: "negzero", Value: math.Copysign(0, -1), Time: end},
			{Name: "small", Value: 0.000123, Time: end}, {Name: "frac", Value: -12.3456, Unit: "°C", Time: end},
		}},
	}}
	add("quiet_and_apart", p)
	p.Device, p.Range = "values", Range(9)
	add("odd_range", p)

	p = testPage(2, 2, Range24h, true)
	from, to := Range24h.Window(end)
	p.Charts = append(p.Charts,
		Chart{Title: "hall: mode", Unit: "", From: from, To: to, Level: aggregate.Minute, Before: "off",
			Texts: []Text{{from.Add(2 * time.Hour), "heat"}, {from.Add(9 * time.Hour), "<cool>"}, {from.Add(20 * time.Hour), "off"}}},
		Chart{Title: "desk: action", From: from, To: to, Level: aggregate.Minute, Events: true,
			Texts: []Text{{from.Add(time.Hour), "single"}, {from.Add(3 * time.Hour), "double & \"hold\""}}},
	)
	p.Location = time.FixedZone("UTC+1", 3600)
	add("text_series", p)

	for i, s := range hostile {
		add(fmt.Sprintf("hostile_%02d", i), hostilePage(s))
	}
	return cs
}

// hostilePage is a page with s in every string it shows.
func hostilePage(s string) Page {
	p := testPage(3, 3, Range1h, false)
	from, to := Range1h.Window(end)
	p.Charts = []Chart{{Title: s, Unit: s, From: from, To: to, Level: aggregate.Minute,
		Buckets: series(from, to, aggregate.Minute, func(i int, _ time.Time) (float64, float64, bool) { return float64(i % 7), 1, i > 50 }),
		Points:  []Point{{end.Add(-time.Minute), 3}, {end.Add(-30 * time.Second), 4}}}}
	p.Title, p.Version = s, s
	h := &p.Health
	h.MQTT.Address, h.MQTT.LastError, h.MQTT.LastErrorAt = s, s, end.Add(-time.Minute)
	h.Paused = s
	h.ByReason = append(h.ByReason, Count{s, 3})
	h.RecentRejections = append(h.RecentRejections, Rejection{end.Add(-time.Second), s, s, s})
	h.RecentUnmatched = append(h.RecentUnmatched, Unmatched{s, end.Add(-time.Second), 1})
	h.Uplinks = append(h.Uplinks, Uplink{Name: s, LastError: s, LastErrorAt: end.Add(-time.Second)})
	h.Retention.Paused = s
	d := &p.Devices[1]
	d.ID, d.More = s, 2
	d.Metrics[0].Name, d.Metrics[0].Unit = s, s
	d.Metrics[1].Text = s
	p.Devices[2].Metrics[2].Unit = s
	p.Device = s
	p.ChartPages = ChartPages{Metrics: 40, Matching: 9, Filter: s, Page: 2, PerPage: 3}
	p.Location = time.FixedZone(s, -3600)
	return p
}

// loginCases are the login pages the golden files hold.
func loginCases() map[string]LoginPage {
	cs := map[string]LoginPage{
		"login":            {},
		"login_error":      {Next: `/?device="x"`, Error: "<b>wrong token</b>"},
		"login_evil_next":  {Next: "https://evil.example/"},
		"login_next":       {Next: "/?device=a b&range=7d#charts"},
		"login_action_js":  {Action: "javascript:alert(1)"},
		"login_action_url": {Action: "/a b/c?d=%zz&e=%41'(x)\"<y>+ends%4"},
		"login_action_abs": {Action: "HTTPS://host/x"},
		"login_action_rel": {Action: "mailto:x@y"},
		"login_action_end": {Action: "/x%41"},
	}
	for i, s := range hostile {
		cs[fmt.Sprintf("login_hostile_%02d", i)] = LoginPage{Title: s, Action: s, Next: "/" + s, Error: s}
	}
	return cs
}

// partOf returns what the page doc holds in its element of the part
// name: the content of <div data-part="NAME" …>, up to the end of its
// section.
func partOf(doc []byte, name string) []byte {
	i := bytes.Index(doc, []byte(`data-part="`+name+`"`))
	if i < 0 {
		return nil
	}
	i += bytes.IndexByte(doc[i:], '>') + 1
	j := bytes.Index(doc[i:], []byte("</div></section>"))
	if j < 0 {
		return nil
	}
	return doc[i : i+j]
}

// TestWritePage_Golden requires the page and the login page to be the
// bytes of testdata/page, and each part to be what the page holds of
// it. The files were written by html/template before the page was
// written by render.go, so they hold its escaping; -update rewrites
// them from what the page writes now.
func TestWritePage_Golden(t *testing.T) {
	golden := func(name string, got []byte) {
		t.Helper()
		got = withoutStatic(t, name, got)
		path := filepath.Join("testdata", "page", name+".html")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: differs from %s:\n%s", name, path, firstDiff(got, want))
		}
	}
	for _, c := range pageCases() {
		var got bytes.Buffer
		if err := WritePage(&got, c.page); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		golden(c.name, got.Bytes())
		for _, name := range []string{PartHealth, PartDevices, PartCharts} {
			var part bytes.Buffer
			if err := WritePart(&part, name, c.page); err != nil {
				t.Fatalf("%s: %s: %v", c.name, name, err)
			}
			if want := partOf(got.Bytes(), name); !bytes.Equal(part.Bytes(), want) {
				t.Errorf("%s: part %s differs from the page's:\n%s", c.name, name, firstDiff(part.Bytes(), want))
			}
		}
	}
	for name, p := range loginCases() {
		var got bytes.Buffer
		if err := WriteLogin(&got, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden(name, got.Bytes())
	}
}

// withoutStatic returns page with the contents of its <style> element
// (pageCSS, always) and of its <script> element (pageJS, in all but the
// login page) each replaced by the name of its file, so that the golden
// pages hold what is rendered and not 7 KB of constants each.
func withoutStatic(t *testing.T, name string, page []byte) []byte {
	t.Helper()
	for _, c := range []struct{ open, body, close, file string }{
		{"<style>", pageCSS, "</style>", "page.css"},
		{"<script>", pageJS, "</script>", "page.js"},
	} {
		whole := []byte(c.open + c.body + c.close)
		switch n := bytes.Count(page, whole); {
		case n == 0 && c.file == "page.js" && !bytes.Contains(page, []byte("<script")):
		case n != 1:
			t.Errorf("%s: %s is in the page %d times, want once", name, c.file, n)
		default:
			page = bytes.Replace(page, whole, []byte(c.open+"/* "+c.file+" */"+c.close), 1)
		}
	}
	return page
}

// firstDiff shows where got first differs from want, with some of what
// comes before.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-120, 0)
	return fmt.Sprintf("at byte %d\n got: %q\nwant: %q", i, got[from:min(i+120, len(got))], want[from:min(i+120, len(want))])
}
