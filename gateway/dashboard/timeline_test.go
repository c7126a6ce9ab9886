package dashboard

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// timelineCharts are the charts of text series whose SVG is kept in
// testdata/NAME.svg.
func timelineCharts() map[string]Chart {
	from1h, _ := Range1h.Window(end)
	from24h, _ := Range24h.Window(end)
	var mode []Text
	for i, s := range []string{"heat", "off", "heat", "cool", "off", "heat", "eco", "heat"} {
		mode = append(mode, Text{from24h.Add(time.Duration(2+3*i) * time.Hour), s})
	}
	var button []Text
	for i := range 40 {
		s := "single"
		switch {
		case i%7 == 3:
			s = "double"
		case i%11 == 5:
			s = "hold"
		}
		button = append(button, Text{from1h.Add(time.Duration(i*i) * time.Second), s})
	}
	return map[string]Chart{
		// A thermostat's mode over 24 hours: unknown for its first two
		// hours, then four states, heat the longest.
		"states_24h": {Title: "hall: mode", From: from24h, To: end, Level: aggregate.Minute, Texts: mode},
		// A button's presses over 1 hour, bunched towards its start: three
		// kinds of tick.
		"events_1h": {Title: "desk: action", From: from1h, To: end, Level: aggregate.Minute, Texts: button, Events: true},
		// A door closed all along: its state before the range and no
		// reading within it.
		"state_before": {Title: "porch: door", From: from24h, To: end, Level: aggregate.Minute, Before: "closed"},
	}
}

func TestWriteChart_TimelineGolden(t *testing.T) {
	for name, c := range timelineCharts() {
		t.Run(name, func(t *testing.T) {
			doc := []byte(draw(t, c))
			path := filepath.Join("testdata", name+".svg")
			if *update {
				if err := os.WriteFile(path, doc, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(doc, want) {
				t.Errorf("%s differs from the chart drawn now (go test -update rewrites it):\ngot:\n%s", path, doc)
			}
		})
	}
}

// elem is one element of an SVG document: its name, attributes and the
// text of its <title> child.
type elem struct {
	name  string
	attrs map[string]string
	title string
}

// elements parses doc and returns its elements of class class (among
// others: "state" matches class="state unknown"), in document order.
func elements(t *testing.T, doc, class string) []elem {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	var out []elem
	var stack []int // index in out of each open element, -1 for others
	inTitle := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := elem{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			inTitle = tok.Name.Local == "title"
			if class == "" || strings.Contains(" "+e.attrs["class"]+" ", " "+class+" ") {
				out = append(out, e)
				stack = append(stack, len(out)-1)
			} else {
				stack = append(stack, -1)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			inTitle = false
		case xml.CharData:
			if inTitle && len(stack) > 1 {
				if i := stack[len(stack)-2]; i >= 0 {
					out[i].title += string(tok)
				}
			}
		}
	}
}

func num(t *testing.T, e elem, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attrs[name], 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.name, name, e.attrs[name], err)
	}
	return v
}

// near reports whether a written coordinate is b rounded to a tenth.
func near(a, b float64) bool { return math.Abs(a-b) <= 0.1 }

// Each state is a band from its reading to the next, the last one to
// the chart's end, the time before the first reading unknown; repeated
// readings of one state make one band.
func TestWriteChart_StateBands(t *testing.T) {
	from, to := Range1h.Window(end)
	at := func(m int) time.Time { return from.Add(time.Duration(m) * time.Minute) }
	c := Chart{Title: "hall: mode", From: from, To: to, Level: aggregate.Minute, Texts: []Text{
		{at(10), "heat"}, {at(25), "off"}, {at(40), "heat"}, {at(45), "heat"}, {at(50), "cool"},
	}}
	doc := draw(t, c)
	type band struct {
		from, to int
		text     string // "" for unknown
	}
	want := []band{{0, 10, ""}, {10, 25, "heat"}, {25, 40, "off"}, {40, 50, "heat"}, {50, 60, "cool"}}
	got := elements(t, doc, "state")
	if len(got) != len(want) {
		t.Fatalf("got %d bands, want %d:\n%s", len(got), len(want), doc)
	}
	fill := map[string]string{}
	for i, w := range want {
		g := got[i]
		x, wd := num(t, g, "x"), num(t, g, "width")
		if !near(x, c.xOf(at(w.from))) || !near(x+wd, c.xOf(at(w.to))) {
			t.Errorf("band %d: x %v to %v, want %v to %v (minutes %d to %d)", i, x, x+wd, c.xOf(at(w.from)), c.xOf(at(w.to)), w.from, w.to)
		}
		if g.attrs["data-text"] != w.text {
			t.Errorf("band %d: data-text %q, want %q", i, g.attrs["data-text"], w.text)
		}
		if unknown := strings.Contains(g.attrs["class"], "unknown"); unknown != (w.text == "") {
			t.Errorf("band %d: class %q, want unknown only for the time before the first reading", i, g.attrs["class"])
		}
		if f, ok := fill[w.text]; ok && f != g.attrs["fill"] {
			t.Errorf("band %d (%s): fill %s, another band of it %s", i, w.text, g.attrs["fill"], f)
		}
		fill[w.text] = g.attrs["fill"]
	}
	if len(fill) != 4 || fill["heat"] == fill["off"] || fill["heat"] == fill["cool"] || fill["off"] == fill["cool"] {
		t.Errorf("fills %v: want one colour per state, distinct", fill)
	}

	// The legend: most time first, unknown last, with their shares.
	keys := elements(t, doc, "key")
	var gotKeys []string
	for _, k := range keys {
		gotKeys = append(gotKeys, k.title)
	}
	wantKeys := []string{
		"heat: 42 % of the time, 3 readings",
		"off: 25 % of the time, 1 reading",
		"cool: 17 % of the time, 1 reading",
		"unknown: 17 % of the time",
	}
	if fmt.Sprint(gotKeys) != fmt.Sprint(wantKeys) {
		t.Errorf("legend: got %q, want %q", gotKeys, wantKeys)
	}
	if got := legendTexts(doc); fmt.Sprint(got) != "[heat 42 % off 25 % cool 17 % unknown 17 %]" {
		t.Errorf("legend's texts: %q", got)
	}
	if got, want := attr(t, doc, "key", "data-text"), "heat"; got != want {
		t.Errorf("first key's data-text %q, want %q", got, want)
	}
	if !strings.Contains(doc, "heat 42 %, off 25 %, cool 17 %, unknown 17 % of the time; latest cool (Nov 27 11:50 UTC).</desc>") {
		t.Errorf("desc: %s", doc[strings.Index(doc, "<desc>"):strings.Index(doc, "</desc>")])
	}
	if strings.Contains(doc, `class="ylab"`) || strings.Contains(doc, `class="band"`) {
		t.Errorf("a timeline has no value axis nor min–max band:\n%s", doc)
	}
}

// The state before the range fills the time before the first reading:
// nothing is unknown.
func TestWriteChart_StateBefore(t *testing.T) {
	from, to := Range24h.Window(end)
	c := Chart{Title: "porch: door", From: from, To: to, Level: aggregate.Minute, Before: "closed",
		Texts: []Text{{from.Add(-time.Hour), "ignored: before From"}, {from.Add(12 * time.Hour), "open"}, {to.Add(time.Hour), "ignored: after To"}}}
	doc := draw(t, c)
	bands := elements(t, doc, "state")
	if len(bands) != 2 || bands[0].attrs["data-text"] != "closed" || bands[1].attrs["data-text"] != "open" {
		t.Fatalf("bands %v, want closed then open", bands)
	}
	if x := num(t, bands[0], "x"); x != plotL {
		t.Errorf("closed starts at x %v, want the plot's left edge %v", x, float64(plotL))
	}
	if x := num(t, bands[1], "x"); !near(x, c.xOf(from.Add(12*time.Hour))) {
		t.Errorf("open starts at x %v, want %v", x, c.xOf(from.Add(12*time.Hour)))
	}
	if strings.Contains(doc, "unknown") || strings.Contains(doc, "ignored") {
		t.Errorf("unknown time, or readings outside the range, drawn:\n%s", doc)
	}
	if got := legendTexts(doc); fmt.Sprint(got) != "[open 50 % closed 50 %]" {
		t.Errorf("legend: %q", got)
	}
}

// Each event is a tick at its time in its text's colour; the legend
// counts them.
func TestWriteChart_EventTicks(t *testing.T) {
	from, to := Range1h.Window(end)
	at := func(m int) time.Time { return from.Add(time.Duration(m) * time.Minute) }
	c := Chart{Title: "desk: action", From: from, To: to, Level: aggregate.Minute, Events: true, Texts: []Text{
		{at(5), "single"}, {at(12), "double"}, {at(30), "single"}, {at(31), "hold"}, {at(58), "single"},
	}}
	doc := draw(t, c)
	paths := elements(t, doc, "tick")
	want := map[string][]int{"single": {5, 30, 58}, "double": {12}, "hold": {31}}
	if len(paths) != len(want) {
		t.Fatalf("got %d tick paths, want %d:\n%s", len(paths), len(want), doc)
	}
	strokes := map[string]bool{}
	for _, p := range paths {
		text := p.attrs["data-text"]
		var xs []string
		for _, m := range want[text] {
			xs = append(xs, "M"+fmtNum(c.xOf(at(m)))+" 22V70")
		}
		if got := p.attrs["d"]; got != strings.Join(xs, "") {
			t.Errorf("ticks of %q: d %q, want %q", text, got, strings.Join(xs, ""))
		}
		strokes[p.attrs["stroke"]] = true
	}
	if len(strokes) != 3 {
		t.Errorf("strokes %v: want one colour per event text", strokes)
	}
	if got := legendTexts(doc); fmt.Sprint(got) != "[single 3 double 1 hold 1]" {
		t.Errorf("legend: %q", got)
	}
	if !strings.Contains(doc, ": 5 events, single 3, double 1, hold 1; latest single (Nov 27 11:58 UTC).</desc>") {
		t.Errorf("desc: %s", doc[strings.Index(doc, "<desc>"):strings.Index(doc, "</desc>")])
	}
	if strings.Contains(doc, `class="state`) {
		t.Errorf("events drawn as bands:\n%s", doc)
	}
}

// legendTexts returns the text of every <text> element of the legend.
func legendTexts(doc string) []string {
	i := strings.Index(doc, `<g class="legend">`)
	if i < 0 {
		return nil
	}
	var ts []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(doc[i:], -1) {
		ts = append(ts, m[1])
	}
	return ts
}

func fmtNum(v float64) string {
	var b svgBuf
	b.num(v)
	return string(b.b)
}

// Texts come from devices: markup, quotes, ampersands, emoji and bytes
// that are not UTF-8 are written as text, and read back the same
// (but for the bytes, which become U+FFFD).
func TestWriteChart_TimelineEscapes(t *testing.T) {
	from, to := Range1h.Window(end)
	texts := []string{`<script>alert(1)</script>`, `"quoted" & 'single'`, "🔥 heat", "]]><x/>", "a\xffb"}
	for _, events := range []bool{false, true} {
		c := Chart{Title: `<b>"hall"</b>: mode`, From: from, To: to, Level: aggregate.Minute, Events: events}
		for i, s := range texts {
			c.Texts = append(c.Texts, Text{from.Add(time.Duration(i+1) * 5 * time.Minute), s})
		}
		doc := draw(t, c)
		if strings.Contains(doc, "<script") || strings.Contains(doc, "<x/>") || strings.Contains(doc, "<b>") {
			t.Errorf("events %v: markup written as markup:\n%s", events, doc)
		}
		seen := map[string]bool{}
		for _, e := range elements(t, doc, "") {
			if s, ok := e.attrs["data-text"]; ok {
				seen[s] = true
			}
		}
		for _, s := range texts {
			if s == "a\xffb" {
				s = "a\uFFFDb"
			}
			if !seen[s] {
				t.Errorf("events %v: no element with data-text %q (have %v)", events, s, seen)
			}
		}
	}
}

// However many readings and states, the bands are at most MaxColumns,
// the legend at most a palette's colours and two keys, the ticks at most
// one per column for each key: the SVG is bounded.
func TestWriteChart_TimelineBounds(t *testing.T) {
	from, to := Range24h.Window(end)
	step := to.Sub(from) / MaxTexts
	var many []Text
	for i := range MaxTexts {
		many = append(many, Text{from.Add(time.Duration(i) * step), "state " + strconv.Itoa(i%40)})
	}
	for _, events := range []bool{false, true} {
		c := Chart{Title: "mill: status", From: from, To: to, Level: aggregate.Minute, Texts: many, Events: events}
		doc := draw(t, c)
		if n := len(elements(t, doc, "state")); n > MaxColumns {
			t.Errorf("events %v: %d bands, want at most %d", events, n, MaxColumns)
		}
		keys := elements(t, doc, "key")
		if len(keys) != paletteLen {
			t.Errorf("events %v: %d keys, want %d", events, len(keys), paletteLen)
		}
		if !strings.Contains(doc, `<g class="key others">`) || !strings.Contains(doc, "29 others") {
			t.Errorf("events %v: the states beyond the palette are not grouped as 29 others", events)
		}
		for _, p := range elements(t, doc, "tick") {
			if n := strings.Count(p.attrs["d"], "M"); n > MaxColumns+1 {
				t.Errorf("ticks of %q: %d, want at most one a column", p.attrs["data-text"], n)
			}
		}
		if len(doc) > 64<<10 {
			t.Errorf("events %v: the chart of %d readings takes %d bytes", events, len(many), len(doc))
		}
	}

	// Merged to columns, every band still starts and ends on a column's
	// edge and they tile the plot.
	c := Chart{Title: "mill: status", From: from, To: to, Level: aggregate.Minute, Texts: many}
	x := float64(plotL)
	for i, b := range elements(t, draw(t, c), "state") {
		if got := num(t, b, "x"); !near(got, x) {
			t.Fatalf("band %d starts at %v, the one before ends at %v", i, got, x)
		}
		x += num(t, b, "width")
	}
	if !near(x, plotR) {
		t.Errorf("the bands end at %v, want %v", x, float64(plotR))
	}
}

// A text keeps its colour whatever the order of its readings and
// whatever else the chart holds, up to the palette's size, where every
// text has a colour of its own.
func TestWriteChart_StateColours(t *testing.T) {
	from, to := Range1h.Window(end)
	colours := func(states ...string) map[string]string {
		c := Chart{Title: "t", From: from, To: to, Level: aggregate.Minute}
		for i, s := range states {
			c.Texts = append(c.Texts, Text{from.Add(time.Duration(i) * time.Minute), s})
		}
		m := map[string]string{}
		for _, k := range elements(t, draw(t, c), "key") {
			if s, ok := k.attrs["data-text"]; ok {
				m[s] = k.attrs["fill"]
				for _, e := range elements(t, draw(t, c), "") {
					if e.name == "rect" && e.attrs["data-text"] == s {
						m[s] = e.attrs["fill"]
					}
				}
			}
		}
		return m
	}
	a := colours("heat", "cool", "off")
	b := colours("off", "heat", "cool")
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("colours depend on the readings' order: %v and %v", a, b)
	}
	var twelve []string
	for i := range paletteLen {
		twelve = append(twelve, "mode "+strconv.Itoa(i))
	}
	used := map[string]bool{}
	for _, f := range colours(twelve...) {
		used[f] = true
	}
	if len(used) != paletteLen {
		t.Errorf("%d states got %d colours", paletteLen, len(used))
	}
}

func TestIsEvent(t *testing.T) {
	for metric, want := range map[string]bool{
		"action": true, "event": true, "button_action": true, "door_event": true, "sw.action": true,
		"input/event": true, "mode": false, "state": false, "reaction": false, "events": false,
		"action_count": false, "prevent": false, "": false,
	} {
		if got := IsEvent(metric); got != want {
			t.Errorf("IsEvent(%q) = %v, want %v", metric, got, want)
		}
	}
}

// The device list shows a text series' latest text in place of a value,
// escaped.
func TestWritePart_DeviceText(t *testing.T) {
	p := Page{Now: end, Devices: []Device{{ID: "hall", LastSeen: end, Metrics: []Metric{
		{Name: "mode", Text: `<script>"x"</script>`, Time: end},
		{Name: "temp", Value: 0, Unit: "°C", Time: end},
	}}}}
	var buf bytes.Buffer
	if err := WritePart(&buf, PartDevices, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<li>mode <b>&lt;script&gt;&#34;x&#34;&lt;/script&gt;</b></li>`, `<li>temp <b>0</b> °C</li>`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in\n%s", want, buf.String())
		}
	}
}
