package dashboard

import (
	_ "embed"
	"strconv"
	"time"
)

// The page is written part by part, each by a method of pageBuf that
// appends its HTML; values go through the escaping of escape.go. The
// style and the script are the same on every page and are embedded
// as they are sent.

// pageCSS is the content of the pages' <style> element.
//
//go:embed page.css
var pageCSS string

// pageJS is the content of the page's <script> element. It reloads
// the parts: a part is fetched from the page's path with ?part=NAME
// and replaced, unless the page is hidden or the keyboard focus is
// inside it, and only the answer to a part's newest request is shown
// (an older one that comes later, a refresh overtaken by a range
// button, is dropped). It writes the times' labels in the browser's
// zone and gives "3 min ago" a local title.
//
//go:embed page.js
var pageJS string

// pageHead opens every page, up to its <title>.
const pageHead = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="color-scheme" content="light dark">
`

// pageBuf is an HTML page, or a part of one, being written.
type pageBuf struct{ b []byte }

func (b *pageBuf) str(s string) { b.b = append(b.b, s...) }

// int writes n in decimal.
func (b *pageBuf) int(n int64) { b.b = strconv.AppendInt(b.b, n, 10) }

// page writes the whole page of v.
func (b *pageBuf) page(v *view) {
	b.str(pageHead + "<title>")
	b.text(v.Title)
	b.str("</title>\n<style>" + pageCSS + "</style>\n</head>\n")
	b.str(`<body data-refresh="`)
	b.int(int64(v.Refresh))
	b.str(`" data-device="`)
	b.text(v.Device)
	b.str(`" data-range="`)
	b.text(v.Range.String())
	b.str(`" data-filter="`)
	b.text(v.Filter)
	b.str(`" data-page="`)
	if v.Pager.Page > 1 {
		b.int(int64(v.Pager.Page))
	}
	b.str("\">\n<header><h1>")
	b.text(v.Title)
	b.str(`</h1><p class="muted">`)
	if v.Version != "" {
		b.str("version ")
		b.text(v.Version)
		b.str(" · ")
	}
	b.int(int64(len(v.Devices)))
	b.str(" " + Plural(len(v.Devices), "device", "devices") + "</p></header>\n<main>\n")
	b.str("<section aria-labelledby=\"h-health\"><h2 id=\"h-health\">Gateway</h2>\n<div data-part=\"health\">")
	b.health(v)
	b.str("</div></section>\n<section aria-labelledby=\"h-devices\"><h2 id=\"h-devices\">Devices</h2>\n<div data-part=\"devices\">")
	b.devices(v)
	b.str("</div></section>\n<section id=\"charts\" aria-labelledby=\"h-charts\"><h2 id=\"h-charts\">")
	if v.Device != "" {
		b.str("Charts of ")
		b.text(v.Device)
	} else {
		b.str("Charts")
	}
	b.str("</h2>\n")
	if v.Device != "" {
		b.chartForms(v)
	}
	b.str("\n<div data-part=\"charts\" data-tz=\"")
	b.text(v.Zone)
	b.str(`">`)
	b.charts(v)
	b.str("</div></section>\n</main>\n<script>" + pageJS + "</script>\n</body>\n</html>\n")
}

// chartForms writes the range buttons of the device's charts and, when
// the pager has something to say, the filter by metric name.
func (b *pageBuf) chartForms(v *view) {
	b.str(`<form method="get" class="ranges" aria-label="Range of the charts"><input type="hidden" name="device" value="`)
	b.text(v.Device)
	b.str(`">`)
	if v.Filter != "" {
		b.str(`<input type="hidden" name="filter" value="`)
		b.text(v.Filter)
		b.str(`">`)
	}
	if v.Pager.Page > 1 {
		b.str(`<input type="hidden" name="page" value="`)
		b.int(int64(v.Pager.Page))
		b.str(`">`)
	}
	for _, r := range v.Ranges {
		b.str(`<button type="submit" name="range" value="`)
		b.text(r.String())
		b.str(`" aria-pressed="`)
		b.str(strconv.FormatBool(r == v.Range))
		b.str(`">`)
		b.text(r.String())
		b.str(`</button>`)
	}
	b.str("</form>\n")
	if !v.Pager.Show {
		return
	}
	b.str(`<form method="get" class="filter" role="search" aria-label="Charts by metric name"><input type="hidden" name="device" value="`)
	b.text(v.Device)
	b.str(`"><input type="hidden" name="range" value="`)
	b.text(v.Range.String())
	b.str("\">\n<label for=\"filter\">Metrics whose name has</label> <input id=\"filter\" name=\"filter\" type=\"search\" value=\"")
	b.text(v.Filter)
	b.str(`" maxlength="128"> <button type="submit">Show</button></form>`)
}

// health writes the health part: the alerts and a card for each part
// of the gateway.
func (b *pageBuf) health(v *view) {
	if len(v.Alerts) > 0 {
		b.str(`<ul class="alerts">`)
		for _, a := range v.Alerts {
			b.str("<li>")
			b.text(a)
			b.str("</li>")
		}
		b.str("</ul>\n")
	} else {
		b.str("<p class=\"allok\">All is well.</p>\n")
	}
	b.str("<div class=\"cards\">\n\n")
	h := &v.Health
	b.mqttCard(v.Now, h.MQTT)
	b.ingestCards(v.Now, h)
	b.storeCard(h.Store)
	for _, u := range h.Uplinks {
		b.uplinkCard(v.Now, u)
	}
	if len(h.Uplinks) == 0 {
		b.str("<div class=\"card\"><h3>Uplink</h3>\n<p class=\"muted\">Off: no upstream is configured.</p></div>")
	}
	b.str("\n")
	b.retentionCard(v.Now, h.Retention)
	b.str("\n</div>\n<p class=\"muted small\">As of ")
	b.str(at(v.Now, v.Now))
	b.str("</p>\n")
}

func (b *pageBuf) mqttCard(now time.Time, m MQTT) {
	embedded := m.Mode == "embedded"
	b.str("<div class=\"card\"><h3>MQTT</h3>\n<p>")
	if embedded {
		b.str("Embedded broker")
	} else {
		b.str("External broker")
	}
	if m.Address != "" {
		b.str(" <code>")
		b.text(m.Address)
		b.str("</code>")
	}
	b.str("</p>\n<p>")
	switch {
	case !m.Connected:
		b.str(`<span class="bad">not connected</span>`)
	case embedded:
		b.str(`<span class="ok">listening</span>`)
	default:
		b.str(`<span class="ok">connected</span>`)
	}
	if embedded {
		b.str(" · ")
		b.int(m.Clients)
		b.str(" " + Plural(m.Clients, "client", "clients"))
	}
	b.str("</p>\n")
	if m.LastError != "" {
		b.str(`<p class="bad">Last error `)
		b.str(at(now, m.LastErrorAt))
		b.str(": ")
		b.text(m.LastError)
		b.str("</p>")
	}
	b.str("</div>\n")
}

// ingestCards writes the cards of ingest, of the rejected messages and
// of the unmatched topics.
func (b *pageBuf) ingestCards(now time.Time, h *Health) {
	b.str("<div class=\"card\"><h3>Ingest</h3>\n<p><b>")
	b.text(FormatValue(roundTenth(h.IngestRate)))
	b.str("</b> readings/s · ")
	b.text(formatCount(h.Stored))
	b.str(" stored since start, ")
	b.text(formatCount(h.Store.Readings))
	b.str(" in the store</p>\n")
	if h.Paused != "" {
		b.str(`<p class="bad">Paused: `)
		b.text(h.Paused)
		b.str("</p>")
	}
	b.str("</div>\n<div class=\"card\"><h3>Rejected messages</h3>\n<p>")
	b.warnCount(h.Rejected)
	for _, c := range h.ByReason {
		b.str(" · ")
		b.text(c.Name)
		b.str(" ")
		b.text(formatCount(c.N))
	}
	b.str("</p>\n")
	if len(h.RecentRejections) > 0 {
		b.str(`<ul class="recent">`)
		for _, r := range h.RecentRejections {
			b.str("<li>" + at(now, r.Time) + " <code>")
			b.text(r.Topic)
			b.str("</code>: ")
			b.text(r.Reason)
			if r.Detail != "" {
				b.str(" (")
				b.text(r.Detail)
				b.str(")")
			}
			b.str("</li>")
		}
		b.str("</ul>")
	}
	b.str("</div>\n<div class=\"card\"><h3>Unmatched topics</h3>\n<p>")
	b.warnCount(h.Unmatched)
	b.str(" " + Plural(h.Unmatched, "message", "messages") + " on topics no pattern matches</p>\n")
	if len(h.RecentUnmatched) > 0 {
		b.str(`<ul class="recent">`)
		for _, u := range h.RecentUnmatched {
			b.str("<li>" + at(now, u.Last) + " <code>")
			b.text(u.Topic)
			b.str("</code> (")
			b.text(formatCount(u.Messages))
			b.str(")</li>")
		}
		b.str("</ul>")
	}
	b.str("</div>\n")
}

// warnCount writes n in bold, flagged as a warning unless it is 0.
func (b *pageBuf) warnCount(n uint64) {
	if n != 0 {
		b.str(`<b class="warn">`)
	} else {
		b.str("<b>")
	}
	b.text(formatCount(n))
	b.str("</b>")
}

func (b *pageBuf) storeCard(s Store) {
	b.str("<div class=\"card\"><h3>Store</h3>\n<p><b>")
	b.text(formatBytes(s.DiskBytes))
	b.str("</b>")
	if s.MaxDiskBytes != 0 {
		b.str(" of ")
		b.text(formatBytes(s.MaxDiskBytes))
		b.str(" cap (")
		b.text(percent(s.DiskBytes, s.MaxDiskBytes))
		b.str(")")
	}
	b.str(" · ")
	b.text(formatCount(s.Readings))
	b.str(" " + Plural(s.Readings, "reading", "readings") + " in ")
	b.int(int64(s.Series))
	b.str(" series</p>\n")
	if s.MaxDiskBytes != 0 {
		b.str(`<meter min="0" max="`)
		b.int(s.MaxDiskBytes)
		b.str(`" high="`)
		b.int(s.MaxDiskBytes)
		b.str(`" value="`)
		b.int(s.DiskBytes)
		b.str(`" aria-label="store size against its cap"></meter>`)
	}
	b.str("\n")
	if s.FreeBytes != 0 {
		b.str("<p>")
		b.text(formatBytes(s.FreeBytes))
		b.str(" free")
		if s.ReserveBytes != 0 {
			b.str("; ingest pauses below ")
			b.text(formatBytes(s.ReserveBytes))
		}
		b.str("</p>")
	}
	b.str("\n")
	switch s.Limit {
	case "max_disk_bytes":
		b.str("<p>Limit: the cap</p>")
	case "free_space":
		b.str(`<p class="warn">Limit: the free space, `)
		b.text(formatBytes(s.EffectiveMaxDiskBytes))
		b.str(" for the store beside the reserve</p>")
	case "reserve":
		b.str(`<p class="bad">Limit: the reserve; less is free, the oldest data goes</p>`)
	}
	b.str("</div>\n")
}

func (b *pageBuf) uplinkCard(now time.Time, u Uplink) {
	b.str("<div class=\"card\"><h3>Uplink")
	b.text(u.Named())
	b.str("</h3>\n<p>")
	b.warnCount(u.Pending)
	b.str(" " + Plural(u.Pending, "reading", "readings") + " to send")
	if !u.OldestPending.IsZero() {
		b.str(", oldest " + at(now, u.OldestPending))
	}
	b.str("</p>\n<p>Last sent " + at(now, u.LastSuccess) + "</p>\n")
	switch {
	case u.Failing():
		b.str(`<p class="bad">Last error ` + at(now, u.LastErrorAt) + ": ")
		b.text(u.LastError)
		b.str("</p>\n")
	case u.LastError != "":
		b.str(`<p class="muted">Last error ` + at(now, u.LastErrorAt) + ", before the last send: ")
		b.text(u.LastError)
		b.str("</p>")
	}
	b.str("\n")
	if !u.NextAttempt.IsZero() {
		t := u.NextAttempt.UTC()
		b.str(`<p>Next attempt at <time datetime="` + t.Format(time.RFC3339) + `">` + t.Format("15:04:05 UTC") + "</time></p>")
	}
	b.str("</div>\n")
}

func (b *pageBuf) retentionCard(now time.Time, r *Retention) {
	b.str("<div class=\"card\"><h3>Retention</h3>\n")
	if r == nil {
		b.str("<p class=\"muted\">Not running.</p></div>\n")
		return
	}
	if r.Paused != "" {
		b.str(`<p class="warn">Paused: `)
		b.text(r.Paused)
		b.str("</p>")
	} else {
		b.str(`<p class="ok">Running</p>`)
	}
	b.str("\n<p>Last run " + at(now, r.LastRun) + " · ")
	b.text(formatCount(r.Removed))
	b.str(" " + Plural(r.Removed, "reading", "readings") + " removed")
	if r.DroppedUnsent != 0 {
		b.str(` · <span class="bad">`)
		b.text(formatCount(r.DroppedUnsent))
		b.str(" dropped unsent</span>")
	}
	b.str("</p>\n")
	if !r.OldestReading.IsZero() {
		b.str("<p>Oldest reading " + at(now, r.OldestReading) + "</p>")
	}
	b.str("\n</div>\n")
}

// devices writes the devices part: a row for each device, with its
// latest values.
func (b *pageBuf) devices(v *view) {
	if len(v.Devices) == 0 {
		b.str("<p class=\"muted\">No device has sent a reading yet. If one should have, see the rejected messages and unmatched topics above.</p>\n")
		return
	}
	b.str("<div class=\"scroll\"><table>\n<thead><tr><th scope=\"col\">Device</th><th scope=\"col\">Last seen</th><th scope=\"col\">Latest values</th></tr></thead>\n<tbody>\n")
	for _, d := range v.Devices {
		b.device(v, d)
	}
	b.str("</tbody></table></div>\n")
}

// device writes the row of d.
func (b *pageBuf) device(v *view, d Device) {
	quiet := v.Quiet[d.ID]
	if quiet {
		b.str(`<tr class="quiet">`)
	} else {
		b.str("<tr>")
	}
	b.str(`<th scope="row">`)
	b.deviceLink(v, d.ID)
	if d.ID == v.Device {
		b.str(` aria-current="true"`)
	}
	b.str(">")
	b.text(d.ID)
	b.str("</a></th><td>" + at(v.Now, d.LastSeen))
	if quiet {
		b.str(` <span class="flag">quiet</span>`)
	}
	if v.Apart[d.ID] {
		b.str(`<br><span class="small muted">newest reading dated ` + dated(d.Newest) + "</span>")
	}
	b.str("</td><td><ul>")
	for _, m := range d.Metrics {
		b.str("<li>")
		b.text(m.Name)
		b.str(" ")
		switch {
		case m.Time.IsZero():
			b.str(`<span class="muted">–</span>`)
		case m.Text != "":
			b.str("<b>")
			b.text(m.Text)
			b.str("</b>")
		default:
			b.str("<b>")
			b.text(FormatValue(m.Value))
			b.str("</b>")
			if m.Unit != "" {
				b.str(" ")
				b.text(m.Unit)
			}
		}
		b.str("</li>")
	}
	if d.More != 0 {
		b.str("<li>")
		b.deviceLink(v, d.ID)
		b.str(">")
		b.text(formatCount(uint64(max(d.More, 0))))
		b.str(" more " + Plural(d.More, "metric", "metrics") + "</a></li>")
	}
	b.str("</ul></td></tr>\n")
}

// deviceLink opens the link to the charts of the device id, up to the
// end of the start tag's attributes.
func (b *pageBuf) deviceLink(v *view, id string) {
	b.str(`<a href="?device=`)
	b.query(id)
	b.str("&amp;range=")
	b.query(v.Range.String())
	b.str(`#charts"`)
}

// charts writes the charts part: the pager and the device's charts.
func (b *pageBuf) charts(v *view) {
	if v.Device == "" {
		b.str("<p class=\"muted\">Choose a device in the list to see its charts.</p>\n")
		return
	}
	b.pager(v)
	switch {
	case len(v.Charts) > 0:
		b.str("<div class=\"charts\">\n")
		for _, c := range v.Charts {
			b.str("<figure><figcaption>")
			b.text(c.Title)
			if c.Unit != "" {
				b.str(` <span class="muted">(`)
				b.text(c.Unit)
				b.str(")</span>")
			}
			b.str("</figcaption>" + string(c.SVG) + "</figure>\n")
		}
		b.str("</div>\n")
	case v.Pager.Filter != "":
		b.str(`<p class="muted">No metric of `)
		b.text(v.Device)
		b.str(" has “")
		b.text(v.Pager.Filter)
		b.str("” in its name.</p>\n")
	default:
		b.str(`<p class="muted">`)
		b.text(v.Device)
		b.str(" has no metric to chart.</p>")
	}
	b.str("\n\n")
}

// pager writes what the pager says of the device's metrics, and the
// links to the pages before and after; nothing when all are charted.
func (b *pageBuf) pager(v *view) {
	g := &v.Pager
	if !g.Show {
		return
	}
	b.str("<nav class=\"pager\" aria-label=\"Pages of charts\">\n<p>")
	b.text(v.Device)
	b.str(" has ")
	b.text(formatCount(uint64(max(g.Metrics, 0))))
	b.str(" " + Plural(g.Metrics, "metric", "metrics"))
	if g.Filter != "" {
		b.str(", ")
		b.text(formatCount(uint64(max(g.Matching, 0))))
		b.str(" with “")
		b.text(g.Filter)
		b.str("” in the name")
	}
	if g.Last != 0 {
		b.str("; charts of ")
		b.text(formatCount(uint64(max(g.First, 0))))
		b.str("–")
		b.text(formatCount(uint64(max(g.Last, 0))))
	}
	b.str(", ")
	b.int(int64(g.PerPage))
	b.str(" a page.</p>\n")
	if g.Prev != "" {
		b.str(`<a href="`)
		b.url(g.Prev)
		b.str(`" rel="prev">← Previous `)
		b.int(int64(g.PerPage))
		b.str("</a>")
	}
	b.str("<span>Page ")
	b.int(int64(g.Page))
	b.str(" of ")
	b.int(int64(g.Pages))
	b.str("</span>")
	if g.Next != "" {
		b.str(`<a href="`)
		b.url(g.Next)
		b.str(`" rel="next">Next `)
		b.int(int64(g.PerPage))
		b.str(" →</a>")
	}
	b.str("\n</nav>\n")
}

// login writes the login page of p, whose empty fields are filled in.
func (b *pageBuf) login(p LoginPage) {
	b.str(pageHead + "<title>")
	b.text(p.Title)
	b.str(": sign in</title>\n<style>" + pageCSS + "</style>\n</head>\n<body>\n<main class=\"login\">\n<h1>")
	b.text(p.Title)
	b.str("</h1>\n<form method=\"post\" action=\"")
	b.url(p.Action)
	b.str("\">\n<p>This gateway's API asks for its token (the content of <code>http.token_file</code>).</p>\n")
	if p.Error != "" {
		b.str(`<p class="bad" role="alert">`)
		b.text(p.Error)
		b.str("</p>")
	}
	b.str("\n<label for=\"token\">Token</label>\n<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\n<input type=\"hidden\" name=\"next\" value=\"")
	b.text(p.Next)
	b.str("\">\n<button type=\"submit\">Sign in</button>\n</form>\n</main>\n</body>\n</html>\n")
}
