package dashboard

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Page is everything the dashboard shows. The caller fills it in for
// each request; WritePage and WritePart only read it.
type Page struct {
	// Title heads the page; empty is "cairn".
	Title   string
	Version string
	// Now is the time of the page: "3 min ago" counts from it.
	Now time.Time
	// Refresh is how often the page's script reloads its parts; 0 turns
	// the reloading off.
	Refresh time.Duration
	// QuietAfter flags a device whose LastSeen is longer ago than it as
	// quiet; 0 never does.
	QuietAfter time.Duration
	Health     Health
	// Devices are listed in this order.
	Devices []Device
	// Device is the device whose Charts are shown, Range their span (0
	// is Range24h); Device is empty when none is chosen.
	Device string
	Range  Range
	// Charts are Device's charts over Range, one per metric, drawn in
	// this order under their Chart.Title: those of one page of its
	// metrics (ChartPages).
	Charts []Chart
	ChartPages
	// Location is the zone of the Charts whose Location is nil, and is
	// named on the charts' part (data-tz): the page's script asks for
	// the charts again with its own zone (tz) when it is another.
	Location *time.Location
}

// ChartPages says which of Device's metrics Charts are: a device may
// have far more metrics than a page can chart at a time (1,000 is not
// rare), so they are charted PerPage at a time, in name order, and the
// page links to the other pages and offers a filter by name. The zero
// value is one page of every metric there is.
type ChartPages struct {
	// Metrics is how many metrics Device has, Matching how many of them
	// have Filter in their name (all of them when Filter is "").
	Metrics, Matching int
	Filter            string
	// Page is the page of the matching metrics that Charts are (from 1),
	// of PerPage metrics each.
	Page, PerPage int
}

// Health is how the gateway is doing.
type Health struct {
	MQTT MQTT
	// IngestRate is the readings stored per second, lately (over a
	// window of the caller's choosing).
	IngestRate float64
	// Stored counts the readings stored since start (Store.Readings
	// counts those the store holds).
	Stored uint64
	// Rejected counts the messages refused as malformed, ByReason by
	// reason (in this order), RecentRejections the last few, newest
	// first.
	Rejected         uint64
	ByReason         []Count
	RecentRejections []Rejection
	// Unmatched counts the messages on topics no pattern matches,
	// RecentUnmatched the last few such topics, newest first.
	Unmatched       uint64
	RecentUnmatched []Unmatched
	// Paused says why ingest is paused; empty while it is not.
	Paused string
	Store  Store
	// Uplinks are the upstreams, in the configuration's order; none
	// when the gateway works offline.
	Uplinks []Uplink
	// Retention is nil when retention does not run.
	Retention *Retention
}

// MQTT is how the MQTT side is doing.
type MQTT struct {
	// Mode is "embedded" (cairn's own broker) or "external".
	Mode, Address string
	// Connected: embedded, listening; external, connected and
	// subscribed.
	Connected bool
	// Clients is the number of clients connected to the embedded broker.
	Clients int64
	// LastError says why the external broker could not be reached or
	// refused cairn, at LastErrorAt; empty once connected.
	LastError   string
	LastErrorAt time.Time
}

// Count is a number of things of one name.
type Count struct {
	Name string
	N    uint64
}

// Rejection is one refused message.
type Rejection struct {
	Time                  time.Time
	Topic, Reason, Detail string
}

// Unmatched is a topic that no pattern matched.
type Unmatched struct {
	Topic    string
	Last     time.Time
	Messages uint64
}

// Store is the disk the store takes and has.
type Store struct {
	Readings uint64
	Series   int
	// DiskBytes is what the store takes, MaxDiskBytes its cap (0:
	// none); FreeBytes is what the file system has free (0: unknown),
	// ReserveBytes the free space below which ingest pauses.
	DiskBytes, MaxDiskBytes, FreeBytes, ReserveBytes int64
	// Limit names what binds the store's size: "max_disk_bytes" (the
	// cap), "free_space" (what the file system leaves beside the
	// reserve, EffectiveMaxDiskBytes, is less than the cap) or "reserve"
	// (less than the reserve is free); "" with no cap.
	Limit                 string
	EffectiveMaxDiskBytes int64
}

// capInForce returns the cap that binds the store: MaxDiskBytes, or
// EffectiveMaxDiskBytes when that is known and less.
func (s Store) capInForce() int64 {
	if s.EffectiveMaxDiskBytes > 0 {
		return min(s.MaxDiskBytes, s.EffectiveMaxDiskBytes)
	}
	return s.MaxDiskBytes
}

// Uplink is how sending upstream is doing. Zero times are unknown or
// never.
type Uplink struct {
	// Name is the upstream's name in the configuration.
	Name string
	// Pending counts the readings not sent yet, OldestPending is the
	// time of the first of them.
	Pending       uint64
	OldestPending time.Time
	LastSuccess   time.Time
	// LastError is the last failure, at LastErrorAt.
	LastError   string
	LastErrorAt time.Time
	// NextAttempt is set while waiting to try a batch again.
	NextAttempt time.Time
}

// Named is " " and the upstream's name, or "" for the upstream named
// default, the one that the configuration's single uplink: block makes:
// "Uplink", "the uplink is failing" read as they did before lists.
func (u Uplink) Named() string {
	if u.Name == "default" || u.Name == "" {
		return ""
	}
	return " " + u.Name
}

// Failing reports whether the uplink's last error came after its last
// success: an error that a later send put behind it is past, shown but
// not raised.
func (u Uplink) Failing() bool {
	return u.LastError != "" && u.LastErrorAt.After(u.LastSuccess)
}

// Retention is what retention does. Zero times are unknown or never.
type Retention struct {
	// Paused says why retention by age is paused; empty while it is not.
	Paused           string
	LastRun, NextRun time.Time
	// Removed counts the readings removed since start, DroppedUnsent
	// those the disk cap dropped before they were sent.
	Removed, DroppedUnsent uint64
	OldestReading          time.Time
}

// Device is one device and the latest value of each of its metrics, or
// of the first of them when it has more than a row can show.
type Device struct {
	ID string
	// LastSeen is when the gateway last heard from the device (zero:
	// never), which says whether it is quiet; Newest is the time of its
	// newest reading, as the reading says, shown where it is more than
	// a minute apart from LastSeen.
	LastSeen, Newest time.Time
	Metrics          []Metric
	// More is how many metrics the device has beyond Metrics; the row
	// says how many, with a link to the device's charts.
	More int
}

// Metric is the latest reading of one metric of a device.
type Metric struct {
	Name, Unit string
	Value      float64
	// Text is the text of the latest reading of a text series, shown
	// in place of Value; "" for a number.
	Text string
	// Time is when Value was read; zero when no reading is known.
	Time time.Time
}

// The names of the parts of the page that WritePart writes and the
// page's script reloads.
const (
	PartHealth  = "health"
	PartDevices = "devices"
	PartCharts  = "charts"
)

// ErrUnknownPart is returned by WritePart for a name that is not a part.
var ErrUnknownPart = errors.New("dashboard: unknown part")

// SessionCookie is the name of the cookie that holds a session after a
// login with the API's bearer token (see LoginPage).
const SessionCookie = "cairn_session"

// percent says a of b in whole percent: "38 %".
func percent(a, b int64) string {
	return strconv.FormatFloat(float64(a)/float64(b)*100, 'f', 0, 64) + " %"
}

// roundTenth rounds v to a tenth: the ingest rate is shown so.
func roundTenth(v float64) float64 { return math.Round(v*10) / 10 }

// view is a Page with what the page derives from it.
type view struct {
	Page
	Quiet   map[string]bool // devices flagged quiet
	Apart   map[string]bool // devices whose newest reading is dated apart from when they were last heard
	NQuiet  int
	Charts  []renderedChart
	Pager   pager
	Ranges  []Range
	Zone    string
	Refresh int // seconds
	Alerts  []string
}

// renderedChart is a chart's metric and its SVG.
type renderedChart struct {
	Title string
	Unit  string
	SVG   string
}

// WritePage writes p as one HTML page: inline CSS and script, no
// external assets. The page's script reloads the parts every
// p.Refresh from the page's own path, with the query part=NAME,
// device, range and tz (the browser's IANA zone): the server answers
// those with WritePart.
func WritePage(w io.Writer, p Page) error {
	return execute(w, "page", p)
}

// WritePart writes the HTML of one part of p: PartHealth, PartDevices or
// PartCharts, as the page holds it. It returns an error wrapping
// ErrUnknownPart, and writes nothing, for any other name.
func WritePart(w io.Writer, name string, p Page) error {
	switch name {
	case PartHealth, PartDevices, PartCharts:
		return execute(w, name, p)
	}
	return fmt.Errorf("%w %q", ErrUnknownPart, name)
}

// execute writes the part name of p (or the page) into a buffer
// first, so that a failure writes nothing.
func execute(w io.Writer, name string, p Page) error {
	v, err := newView(p, name)
	if err != nil {
		return err
	}
	var b pageBuf
	switch name {
	case "page":
		b.page(v)
	case PartHealth:
		b.health(v)
	case PartDevices:
		b.devices(v)
	case PartCharts:
		b.charts(v)
	}
	_, err = w.Write(b.b)
	return err
}

// newView derives what the part name (or the page) shows of p: it draws the
// charts only for the page and the charts part.
func newView(p Page, name string) (*view, error) {
	if p.Title == "" {
		p.Title = "cairn"
	}
	if p.Location == nil {
		p.Location = time.UTC
	}
	if p.Range == 0 {
		p.Range = Range24h
	}
	v := &view{Page: p, Ranges: Ranges(), Zone: p.Location.String(), Refresh: int(p.Refresh / time.Second)}
	if p.QuietAfter > 0 {
		v.Quiet = make(map[string]bool)
		for _, d := range p.Devices {
			if p.Now.Sub(d.LastSeen) > p.QuietAfter {
				v.Quiet[d.ID] = true
				v.NQuiet++
			}
		}
	}
	for _, d := range p.Devices {
		if !d.Newest.IsZero() && !d.LastSeen.IsZero() && (d.Newest.Sub(d.LastSeen) > readingApart || d.LastSeen.Sub(d.Newest) > readingApart) {
			if v.Apart == nil {
				v.Apart = make(map[string]bool)
			}
			v.Apart[d.ID] = true
		}
	}
	v.Alerts = alerts(p, v.NQuiet)
	if name != "page" && name != PartCharts {
		return v, nil
	}
	v.Pager = newPager(p)
	var b svgBuf
	for _, c := range p.Charts {
		if c.Location == nil {
			c.Location = p.Location
		}
		b.b = b.b[:0]
		if err := b.chart(c, false); err != nil {
			return nil, err
		}
		v.Charts = append(v.Charts, renderedChart{Title: c.Title, Unit: c.Unit, SVG: string(b.b)})
	}
	return v, nil
}

// mqttReason is ": " and why MQTT is not connected, or "" when that is
// not known.
func mqttReason(m MQTT) string {
	if m.LastError == "" {
		return ""
	}
	return ": " + m.LastError
}

// readingApart is how far a device's newest reading may be dated from
// when it was last heard before the devices' list shows its date.
const readingApart = time.Minute

// alerts lists what needs a person's eye, in words; none when all is
// well.
func alerts(p Page, quiet int) []string {
	var as []string
	h := p.Health
	if !h.MQTT.Connected {
		as = append(as, "MQTT is not connected"+mqttReason(h.MQTT))
	}
	if h.Paused != "" {
		as = append(as, "ingest is paused: "+h.Paused)
	}
	for _, u := range h.Uplinks {
		if u.Failing() {
			as = append(as, "the uplink"+u.Named()+" is failing: "+u.LastError)
		}
	}
	if r := h.Retention; r != nil && r.Paused != "" {
		as = append(as, "retention is paused: "+r.Paused)
	}
	if s := h.Store; s.MaxDiskBytes > 0 && s.DiskBytes*10 > s.capInForce()*9 {
		as = append(as, "the store is above 90 % of its cap")
	}
	switch {
	case quiet == 1:
		as = append(as, "1 device is quiet")
	case quiet > 1:
		as = append(as, strconv.Itoa(quiet)+" devices are quiet")
	}
	return as
}

// LoginPage is the form that asks for the API's bearer token
// (http.token_file) when a request has neither the token nor a session.
// The form POSTs the fields "token" and "next" to Action; the server
// checks the token, sets the session cookie SessionCookie and redirects
// to next (only a path on the same host, see LocalPath), or answers
// this page again with Error.
type LoginPage struct {
	// Title heads the page; empty is "cairn".
	Title string
	// Action is where the form is posted; empty is "/login".
	Action string
	// Next is where to go once logged in; empty is "/".
	Next string
	// Error says why the last attempt failed; empty for none.
	Error string
}

// WriteLogin writes the login page.
func WriteLogin(w io.Writer, p LoginPage) error {
	var b pageBuf
	b.login(fillLogin(p))
	_, err := w.Write(b.b)
	return err
}

// fillLogin returns p with its empty fields filled in and Next made a
// local path.
func fillLogin(p LoginPage) LoginPage {
	if p.Title == "" {
		p.Title = "cairn"
	}
	if p.Action == "" {
		p.Action = "/login"
	}
	p.Next = LocalPath(p.Next)
	return p
}

// LocalPath returns next if it is a path on this host ("/…", but not
// "//host/…", which browsers take for another host, nor one with a
// backslash anywhere, which browsers read as a slash and which the
// redirect's path cleaning can bring to the front: "/./\host" becomes
// "/\host"), and "/" otherwise: a login redirects only there.
func LocalPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	return next
}

// formatCount writes n with thousands separators: 1,234,567.
func formatCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// formatBytes writes n in binary units: 512 B, 1.5 KiB, 3.2 GiB.
func formatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/1024, 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i:i+1] + "iB"
}

// at writes t as a <time> element that says how long before now it was,
// with the UTC time in its title; the page's script writes the title in
// the browser's zone. The zero time is "never".
func at(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return `<time datetime="` + t.UTC().Format(time.RFC3339) +
		`" data-t="` + strconv.FormatInt(t.UnixMilli(), 10) + `" data-f="a" title="` +
		t.UTC().Format("2006-01-02 15:04:05 UTC") + `">` + ago(now, t) + `</time>`
}

// dated writes t as a date and time in UTC, in a <time> element that
// the page's script leaves as it is.
func dated(t time.Time) string {
	return `<time datetime="` + t.UTC().Format(time.RFC3339) + `">` + t.UTC().Format("2006-01-02 15:04 UTC") + `</time>`
}

// ago says how long before now t was: "12 s ago", "3 min ago", "5 h
// ago", "2 days ago"; "never" for the zero time, "just now" for a time
// not before now.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	}
	return strconv.Itoa(int(d/day)) + " days ago"
}
