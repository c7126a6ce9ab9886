package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// testPage returns a page of n devices with m metrics each, all seen in
// the last minute but every tenth, quiet for an hour; with charts, the
// first device's charts over r.
func testPage(n, m int, r Range, charts bool) Page {
	now := end
	names := []string{"temperature", "humidity", "pressure", "battery", "rssi", "co2", "lux"}
	units := []string{"°C", "%", "hPa", "V", "dBm", "ppm", "lx"}
	p := Page{
		Version: "1.4.0", Now: now, Refresh: 10 * time.Second, QuietAfter: 15 * time.Minute, Range: r,
		Health: Health{
			MQTT:       MQTT{Mode: "embedded", Address: "127.0.0.1:1883", Connected: true, Clients: int64(n)},
			IngestRate: float64(n*m) / 10, Stored: 123456789,
			Rejected: 42, ByReason: []Count{{"bad_json", 40}, {"no_value", 2}},
			RecentRejections: []Rejection{{now.Add(-time.Minute), "sensors/x/state", "bad_json", "unexpected end of input"}},
			Unmatched:        7, RecentUnmatched: []Unmatched{{"zigbee2mqtt/bridge/state", now.Add(-3 * time.Minute), 7}},
			Store:     Store{Readings: 123456789, Series: n * m, DiskBytes: 3 << 30, MaxDiskBytes: 8 << 30, FreeBytes: 20 << 30, ReserveBytes: 256 << 20},
			Uplinks:   []Uplink{{Name: "default", Pending: 1200, OldestPending: now.Add(-2 * time.Minute), LastSuccess: now.Add(-70 * time.Second)}},
			Retention: &Retention{Paused: "the clock is not synchronised", LastRun: now.Add(-time.Hour), Removed: 1000},
		},
	}
	for i := range n {
		d := Device{ID: fmt.Sprintf("sensor-%03d", i), LastSeen: now.Add(-time.Duration(i%60) * time.Second)}
		if i%10 == 9 {
			d.LastSeen = now.Add(-time.Hour)
		}
		for j := range m {
			d.Metrics = append(d.Metrics, Metric{Name: names[j%len(names)], Unit: units[j%len(units)], Value: 20 + float64(i)/7 + float64(j)*1.13, Time: d.LastSeen})
		}
		p.Devices = append(p.Devices, d)
	}
	if charts && n > 0 {
		p.Device = p.Devices[0].ID
		from, to := r.Window(now)
		for j, mt := range p.Devices[0].Metrics {
			c := Chart{Title: mt.Name, Unit: mt.Unit, From: from, To: to, Level: r.Level()}
			c.Buckets = series(from, to, r.Level(), func(i int, _ time.Time) (float64, float64, bool) {
				return 20 + float64(j) + 3*math.Sin(float64(i)/50), 0.4, true
			})
			if r.Raw() {
				for t := from; t.Before(to); t = t.Add(15 * time.Second) {
					c.Points = append(c.Points, Point{t, 20 + float64(j) + 3*math.Sin(float64(t.Sub(from)/time.Minute)/50)})
				}
			}
			p.Charts = append(p.Charts, c)
		}
	}
	return p
}

func render(t *testing.T, p Page) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePage(&buf, p); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestWritePage_EscapesNames(t *testing.T) {
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
	doc := render(t, p)
	if got := strings.Count(doc, "<script"); got != 1 {
		t.Errorf("%d <script elements, want 1 (the page's own)", got)
	}
	for _, bad := range []string{"<img", "<b>unit", `alert("x")`} {
		if strings.Contains(doc, bad) {
			t.Errorf("page holds %q unescaped", bad)
		}
	}
	if !strings.Contains(doc, `?device=%3cscript%3ealert%28%22x%22%29%3c%2fscript%3e&amp;range=1h#charts`) {
		t.Errorf("device link not escaped as a query value:\n%s", doc)
	}
	if !strings.Contains(doc, `<h2 id="h-charts">Charts of &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</h2>`) {
		t.Errorf("device name not escaped in the charts' heading:\n%s", doc)
	}
}

// external matches what would make the page load anything from another
// host: a URL with a scheme or a host in src, href, action or CSS url(),
// and the elements or rules that load files.
var external = regexp.MustCompile(`(?i)(src|href|action|srcset|poster|data)\s*=\s*["']?\s*([a-z][a-z0-9+.-]*:|//)|url\(|@import|<link|<iframe|<img|<object|<embed`)

func TestWritePage_NoExternalURL(t *testing.T) {
	for _, p := range []Page{testPage(20, 5, Range1h, true), testPage(20, 5, Range90d, true), {}} {
		doc := render(t, p)
		if m := external.FindString(doc); m != "" {
			t.Errorf("page loads from elsewhere: %q", m)
		}
		if strings.Contains(doc, "http://") || strings.Contains(doc, "https://") {
			i := max(strings.Index(doc, "http://"), strings.Index(doc, "https://"))
			t.Errorf("page holds a URL: …%s…", doc[max(i-80, 0):min(i+80, len(doc))])
		}
	}
	var buf bytes.Buffer
	if err := WriteLogin(&buf, LoginPage{Next: "https://evil.example/"}); err != nil {
		t.Fatal(err)
	}
	if m := external.FindString(buf.String()); m != "" || strings.Contains(buf.String(), "evil") {
		t.Errorf("login page loads from or goes elsewhere: %q\n%s", m, buf.String())
	}
}

func TestWritePage_Sections(t *testing.T) {
	p := testPage(20, 5, Range7d, true)
	doc := render(t, p)
	for _, want := range []string{
		`<html lang="en">`, `<meta name="viewport"`,
		`<body data-refresh="10" data-device="sensor-000" data-range="7d" data-filter="" data-page="">`,
		"Embedded broker <code>127.0.0.1:1883</code>", "20 clients",
		"<b>10</b> readings/s", "bad_json 40", "unexpected end of input",
		"zigbee2mqtt/bridge/state", "3.0 GiB</b> of 8.0 GiB cap (38 %)", "20.0 GiB free; ingest pauses below 256.0 MiB",
		"<b class=\"warn\">1,200</b> readings to send", "retention is paused: the clock is not synchronised",
		"2 devices are quiet", `<tr class="quiet"><th scope="row"><a href="?device=sensor-009&amp;range=7d#charts">sensor-009</a>`,
		`<span class="flag">quiet</span>`, `<li>temperature <b>20</b> °C</li>`,
		`<button type="submit" name="range" value="7d" aria-pressed="true">7d</button>`,
		`<div data-part="charts" data-tz="UTC">`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if got := strings.Count(doc, `aria-pressed="true"`); got != 1 {
		t.Errorf("%d pressed range buttons, want 1", got)
	}
	p.Health.MQTT.Clients = 1
	if doc := render(t, p); !strings.Contains(doc, "· 1 client</p>") {
		t.Errorf("one client is not said in the singular")
	}
	if got := strings.Count(doc, `<button type="submit" name="range"`); got != 4 {
		t.Errorf("%d range buttons, want 4", got)
	}
	if got := strings.Count(doc, `<svg viewBox=`); got != 5 {
		t.Errorf("%d charts, want 5", got)
	}
}

// TestWritePart checks that each part is written as the page holds it,
// inside its data-part element.
func TestWritePart(t *testing.T) {
	p := testPage(10, 3, Range24h, true)
	doc := render(t, p)
	for _, name := range []string{PartHealth, PartDevices, PartCharts} {
		var buf bytes.Buffer
		if err := WritePart(&buf, name, p); err != nil {
			t.Fatal(err)
		}
		i := strings.Index(doc, `data-part="`+name+`"`)
		if i < 0 {
			t.Fatalf("page has no part %s", name)
		}
		i += strings.Index(doc[i:], ">") + 1
		if !strings.HasPrefix(doc[i:], buf.String()+"</div>") {
			t.Errorf("part %s differs from the page's:\n%s", name, buf.String())
		}
	}
	err := WritePart(io.Discard, "page", p)
	if !errors.Is(err, ErrUnknownPart) {
		t.Errorf("WritePart(page) = %v, want ErrUnknownPart", err)
	}
}

func TestWritePage_Empty(t *testing.T) {
	doc := render(t, Page{Now: end})
	for _, want := range []string{"No device has sent a reading yet", "Choose a device", "MQTT is not connected", "Off: no upstream"} {
		if !strings.Contains(doc, want) {
			t.Errorf("empty page lacks %q", want)
		}
	}
	if strings.Contains(doc, "<form") {
		t.Error("range buttons without a device")
	}
}

func TestWritePage_BadChart(t *testing.T) {
	p := testPage(2, 1, Range24h, true)
	p.Charts[0].Level = 0
	var buf bytes.Buffer
	if err := WritePage(&buf, p); !errors.Is(err, ErrBadChart) {
		t.Errorf("WritePage = %v, want ErrBadChart", err)
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %d bytes of a failed page", buf.Len())
	}
}

func TestWriteLogin(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteLogin(&buf, LoginPage{Next: `/?device="x"`, Error: "<b>wrong token</b>"}); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	for _, want := range []string{
		`<form method="post" action="/login">`,
		`<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>`,
		`<input type="hidden" name="next" value="/?device=&#34;x&#34;">`,
		`<p class="bad" role="alert">&lt;b&gt;wrong token&lt;/b&gt;</p>`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("login page lacks %q:\n%s", want, doc)
		}
	}
}

func TestLocalPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "/"}, {"/", "/"}, {"/?device=a&range=7d#charts", "/?device=a&range=7d#charts"},
		{"//evil.example/", "/"}, {`/\evil.example`, "/"}, {"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"}, {"/a\nb", "/"}, {"x", "/"},
		{`/./\evil.example`, "/"}, {`/x/../\evil.example`, "/"}, {`/a\b`, "/"},
	} {
		if got := LocalPath(tc.in); got != tc.want {
			t.Errorf("LocalPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRange(t *testing.T) {
	for _, tc := range []struct {
		r     Range
		name  string
		d     time.Duration
		level aggregate.Level
		raw   bool
	}{
		{Range1h, "1h", time.Hour, aggregate.Minute, true},
		{Range24h, "24h", 24 * time.Hour, aggregate.Minute, false},
		{Range7d, "7d", 7 * day, aggregate.Hour, false},
		{Range90d, "90d", 90 * day, aggregate.Hour, false},
	} {
		got, err := ParseRange(tc.name)
		if err != nil || got != tc.r {
			t.Errorf("ParseRange(%q) = %v, %v, want %v", tc.name, got, err, tc.r)
		}
		if tc.r.String() != tc.name || tc.r.Duration() != tc.d || tc.r.Level() != tc.level || tc.r.Raw() != tc.raw {
			t.Errorf("%v: %v %v %v, want %v %v %v", tc.name, tc.r.Duration(), tc.r.Level(), tc.r.Raw(), tc.d, tc.level, tc.raw)
		}
		// The columns of a range's chart are never more than MaxColumns.
		from, to := tc.r.Window(end)
		c := Chart{From: from, To: to, Level: tc.level}
		if cols, _ := c.columns(); len(cols) > MaxColumns+1 {
			t.Errorf("%v: %d columns", tc.name, len(cols))
		}
	}
	if _, err := ParseRange("2h"); err == nil {
		t.Error("ParseRange(2h) did not fail")
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{formatCount(0), "0"}, {formatCount(999), "999"}, {formatCount(1000), "1,000"}, {formatCount(123456789), "123,456,789"},
		{formatBytes(512), "512 B"}, {formatBytes(1536), "1.5 KiB"}, {formatBytes(3 << 30), "3.0 GiB"},
		{ago(end, time.Time{}), "never"}, {ago(end, end), "just now"}, {ago(end, end.Add(-90*time.Second)), "1 min ago"},
		{ago(end, end.Add(-5*time.Hour)), "5 h ago"}, {ago(end, end.Add(-72*time.Hour)), "3 days ago"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// A device with more metrics than a page charts: the charts part says
// how many there are, which are charted and links to the pages before
// and after; the page offers the filter, and the range buttons and the
// script keep the filter and the page. A device listed with some of its
// metrics says how many more it has.
func TestWritePage_ChartPages(t *testing.T) {
	p := testPage(3, 5, Range90d, true)
	p.Device = "sensor-000"
	p.ChartPages = ChartPages{Metrics: 1000, Matching: 100, Filter: "<b>", Page: 2, PerPage: 5}
	p.Devices[0].More = 995
	doc := render(t, p)
	for _, want := range []string{
		`<body data-refresh="10" data-device="sensor-000" data-range="90d" data-filter="&lt;b&gt;" data-page="2">`,
		`<input type="hidden" name="filter" value="&lt;b&gt;"><input type="hidden" name="page" value="2">`,
		`<input id="filter" name="filter" type="search" value="&lt;b&gt;" maxlength="128">`,
		`sensor-000 has 1,000 metrics, 100 with “&lt;b&gt;” in the name; charts of 6–10, 5 a page.`,
		`<a href="?device=sensor-000&amp;filter=%3Cb%3E&amp;range=90d#charts" rel="prev">← Previous 5</a>`,
		`<span>Page 2 of 20</span>`,
		`<a href="?device=sensor-000&amp;filter=%3Cb%3E&amp;page=3&amp;range=90d#charts" rel="next">Next 5 →</a>`,
		`<li><a href="?device=sensor-000&amp;range=90d#charts">995 more metrics</a></li>`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The last page has no next, the first no previous; a filter that
	// matches nothing says so.
	p.ChartPages = ChartPages{Metrics: 12, Matching: 12, Page: 3, PerPage: 5}
	p.Charts = p.Charts[:2]
	if doc := render(t, p); !strings.Contains(doc, "charts of 11–12, 5 a page.") || strings.Contains(doc, `rel="next"`) || !strings.Contains(doc, `rel="prev"`) {
		t.Errorf("the last page: no next link and a previous one wanted:\n%s", doc)
	}
	p.ChartPages, p.Charts = ChartPages{Metrics: 12, Filter: "zzz", Page: 1, PerPage: 5}, nil
	if doc := render(t, p); !strings.Contains(doc, "No metric of sensor-000 has “zzz” in its name.") || strings.Contains(doc, `rel="prev"`) {
		t.Errorf("a filter that matches nothing:\n%s", doc)
	}
	// Few metrics: nothing to say, no filter.
	p = testPage(3, 5, Range24h, true)
	if doc := render(t, p); strings.Contains(doc, `class="pager"`) || strings.Contains(doc, `id="filter"`) {
		t.Errorf("a device with 5 metrics and no ChartPages gets a pager or a filter")
	}
}

// TestWritePage_Counts checks that a count of one is said in the
// singular and others in the plural, and that the ingest card says what
// its count of stored readings counts.
func TestWritePage_Counts(t *testing.T) {
	p := testPage(1, 1, Range24h, false)
	h := &p.Health
	h.MQTT.Clients, h.Unmatched, h.Store.Readings, h.Uplinks[0].Pending, h.Retention.Removed = 1, 1, 1, 1, 1
	h.Stored = 1
	one := render(t, p)
	for _, want := range []string{
		"· 1 device</p>", "· 1 client</p>", "1 stored since start, 1 in the store",
		"<b class=\"warn\">1</b> message on topics", "1 reading in ", "<b class=\"warn\">1</b> reading to send", "1 reading removed",
	} {
		if !strings.Contains(one, want) {
			t.Errorf("page with one of each lacks %q", want)
		}
	}
	p = testPage(2, 1, Range24h, false)
	h = &p.Health
	h.MQTT.Clients, h.Unmatched, h.Store.Readings, h.Uplinks[0].Pending, h.Retention.Removed = 0, 2, 1234, 2, 0
	h.Stored = 1000
	many := render(t, p)
	for _, want := range []string{
		"· 2 devices</p>", "· 0 clients</p>", "1,000 stored since start, 1,234 in the store",
		"<b class=\"warn\">2</b> messages on topics", "1,234 readings in ", "<b class=\"warn\">2</b> readings to send", "0 readings removed",
	} {
		if !strings.Contains(many, want) {
			t.Errorf("page with several of each lacks %q", want)
		}
	}
}

// The store card names the limit that binds, and the alert goes by the
// cap in force.
func TestWritePart_StoreLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		limit     string
		eff       int64
		want      string
		wantAlert bool
	}{
		{"max_disk_bytes", 100 * mib, "Limit: the cap", false},
		{"free_space", 40 * mib, "Limit: the free space, 40.0 MiB for the store beside the reserve", true},
		{"reserve", 20 * mib, "Limit: the reserve", true},
		{"", 0, "", false},
	} {
		p := Page{Now: end, Health: Health{Store: Store{DiskBytes: 38 * mib, MaxDiskBytes: 100 * mib, Limit: tc.limit, EffectiveMaxDiskBytes: tc.eff}}}
		var buf bytes.Buffer
		if err := WritePart(&buf, PartHealth, p); err != nil {
			t.Fatal(err)
		}
		doc := buf.String()
		if tc.want != "" && !strings.Contains(doc, tc.want) || tc.want == "" && strings.Contains(doc, "Limit:") {
			t.Errorf("limit %q: the store card says %q, want %q", tc.limit, doc, tc.want)
		}
		if got := strings.Contains(doc, "above 90 % of its cap"); got != tc.wantAlert {
			t.Errorf("limit %q: alert %v, want %v", tc.limit, got, tc.wantAlert)
		}
	}
}

// TestWritePage_UplinkErrorPast shows the uplink's last error in red as
// long as no send succeeded after it, and as past once one did.
func TestWritePage_UplinkErrorPast(t *testing.T) {
	p := testPage(1, 1, Range24h, false)
	now := p.Now
	u := &p.Health.Uplinks[0]
	u.LastError, u.LastErrorAt, u.LastSuccess = "503 Service Unavailable", now.Add(-10*time.Second), now.Add(-time.Minute)
	failing := render(t, p)
	if !strings.Contains(failing, `<p class="bad">Last error <time`) || !strings.Contains(failing, "the uplink is failing: 503 Service Unavailable") {
		t.Errorf("an error after the last send is not shown as failing:\n%s", failing)
	}
	u.LastSuccess = now.Add(-time.Second)
	past := render(t, p)
	if strings.Contains(past, `<p class="bad">Last error`) || strings.Contains(past, "the uplink is failing") {
		t.Errorf("an error before the last send is still shown as failing:\n%s", past)
	}
	if !strings.Contains(past, `<p class="muted">Last error <time`) || !strings.Contains(past, "before the last send: 503 Service Unavailable") {
		t.Errorf("an error before the last send is not shown as past:\n%s", past)
	}
}

// TestWritePart_UplinkCards: a card for each upstream, titled with its
// name ("Uplink" alone for default), and an alert for each one failing,
// naming it; no upstream is one card that says the uplink is off.
func TestWritePart_UplinkCards(t *testing.T) {
	health := func(us ...Uplink) string {
		t.Helper()
		var buf bytes.Buffer
		if err := WritePart(&buf, PartHealth, Page{Now: end, Health: Health{Uplinks: us}}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	failing := Uplink{Name: "central", Pending: 7, LastError: "503 Service Unavailable", LastErrorAt: end.Add(-time.Second)}
	doc := health(Uplink{Name: "vm", LastSuccess: end.Add(-time.Second)}, failing)
	for _, want := range []string{"<h3>Uplink vm</h3>", "<h3>Uplink central</h3>", "the uplink central is failing: 503 Service Unavailable"} {
		if !strings.Contains(doc, want) {
			t.Errorf("two upstreams: the health part lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "the uplink vm is failing") || strings.Contains(doc, "Off: no upstream") {
		t.Errorf("two upstreams, vm sending: %s", doc)
	}
	if doc := health(Uplink{Name: "default"}); !strings.Contains(doc, "<h3>Uplink</h3>") || strings.Contains(doc, "Off: no upstream") {
		t.Errorf("the upstream default: want a card titled Uplink:\n%s", doc)
	}
	if doc := health(); !strings.Contains(doc, "<h3>Uplink</h3>\n<p class=\"muted\">Off: no upstream is configured.</p>") {
		t.Errorf("no upstream: want the uplink card off:\n%s", doc)
	}
}

// A device is quiet by when it was last heard, and its newest reading's
// date is shown where it is more than a minute apart from that.
func TestWritePart_NewestReadingApart(t *testing.T) {
	old := time.Date(2020, 2, 12, 15, 15, 46, 0, time.UTC)
	p := Page{Now: end, QuietAfter: 15 * time.Minute, Devices: []Device{
		{ID: "old-clock", LastSeen: end.Add(-5 * time.Second), Newest: old},
		{ID: "on-time", LastSeen: end.Add(-5 * time.Second), Newest: end.Add(-6 * time.Second)},
		{ID: "silent", LastSeen: end.Add(-time.Hour), Newest: end.Add(-time.Hour)},
	}}
	var buf bytes.Buffer
	if err := WritePart(&buf, PartDevices, p); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, row := range strings.Split(buf.String(), "<tr")[1:] {
		for _, d := range p.Devices {
			if strings.Contains(row, ">"+d.ID+"</a>") {
				rows[d.ID] = row
			}
		}
	}
	for _, tc := range []struct {
		id           string
		quiet, dated bool
	}{{"old-clock", false, true}, {"on-time", false, false}, {"silent", true, false}} {
		row := rows[tc.id]
		if got := strings.Contains(row, `class="quiet"`); got != tc.quiet {
			t.Errorf("%s: quiet %v, want %v: %s", tc.id, got, tc.quiet, row)
		}
		if got := strings.Contains(row, "newest reading dated"); got != tc.dated {
			t.Errorf("%s: newest reading's date shown %v, want %v: %s", tc.id, got, tc.dated, row)
		}
	}
	if !strings.Contains(rows["old-clock"], "2020-02-12 15:15 UTC") {
		t.Errorf("old-clock: no date of its newest reading: %s", rows["old-clock"])
	}
}
