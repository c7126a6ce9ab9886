package dashboard

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxTexts is the most readings of a text series a chart is drawn
// from, 50 a column: the page reads the newest MaxTexts of the range,
// and sets Chart.Truncated when there are more.
const MaxTexts = 50 * MaxColumns

// IsEvent reports whether metric names a series of events (a button's
// "action", a "door_event"), charted as ticks, rather than of states,
// charted as bands: the metric is "action" or "event", or ends in
// "_action", "_event", ".action", ".event", "/action" or "/event".
func IsEvent(metric string) bool {
	if metric == "action" || metric == "event" {
		return true
	}
	for _, sep := range [...]string{"_", ".", "/"} {
		if strings.HasSuffix(metric, sep+"action") || strings.HasSuffix(metric, sep+"event") {
			return true
		}
	}
	return false
}

// palette holds the colours of states and events, 7 bytes each ("#"
// and six hex digits): twelve hues that stay apart from one another
// on the page's light and dark backgrounds.
const palette = "#4e79a7#f28e2b#e15759#76b7b2#59a14f#edc948#b07aa1#ff9da7#9c755f#17becf#bcbd22#7f3c8d"

// paletteLen is how many colours palette holds: a timeline names at
// most this many texts in its legend, and groups the rest as others.
const paletteLen = len(palette) / 7

// The colours of the keys that are not one text.
const (
	othersColor  = "#8c8c8c"
	unknownColor = "#888"
)

// The timeline's geometry, in the units of the chart's viewBox: the
// lane of bands or ticks, the baseline of its time labels, and the
// legend's grid below them, two keys a row: rows and columns leave room
// for the larger text of a phone's screen (15 px where the chart is
// about 360 px wide, 20 units).
const (
	laneT, laneB = 20, 72
	laneFrame    = "M52 20H440V72H52Z"
	laneLabelY   = 88
	legendY      = 110 // the first row's baseline
	legendRow    = 20
	legendCols   = 2
	legendColW   = (plotR - plotL) / legendCols
	// legendRunes is how much of a text the legend writes before an
	// ellipsis; its <title> holds all of it.
	legendRunes = 10
	noTexts     = `<text class="none" x="246" y="50" text-anchor="middle">no data</text>`
)

// key is one entry of a timeline's legend: one text, the texts beyond
// the palette grouped as others, or the time of unknown state.
type key struct {
	text    string
	color   string
	others  int           // for the key of others: how many texts it holds
	unknown bool          // for the key of unknown time
	dur     time.Duration // states: the time in the key's state within [From, To]
	n       int           // the readings of the key's texts within [From, To]
}

// class is the key's class attribute beside the element's own.
func (k *key) class() string {
	switch {
	case k.unknown:
		return " unknown"
	case k.others > 0:
		return " others"
	}
	return ""
}

// name is what the key is called in words.
func (k *key) name() string {
	switch {
	case k.unknown:
		return "unknown"
	case k.others > 0:
		return strconv.Itoa(k.others) + " others"
	}
	return k.text
}

// segment is a stretch of time, in ns since the epoch, in one key's
// state.
type segment struct {
	from, to int64
	k        int
}

// texts returns the Texts within [From, To].
func (c *Chart) texts() []Text {
	lo, hi := 0, len(c.Texts)
	for lo < hi && c.Texts[lo].Time.Before(c.From) {
		lo++
	}
	for hi > lo && c.Texts[hi-1].Time.After(c.To) {
		hi--
	}
	return c.Texts[lo:hi]
}

// isText reports whether c is the chart of a text series.
func (c *Chart) isText() bool { return len(c.Texts) > 0 || c.Before != "" }

// timeline writes c, the chart of a text series, into b.
func (b *svgBuf) timeline(c Chart, standalone bool) {
	ts := c.texts()
	var keys []key
	var segs []segment
	if c.Events {
		keys = eventKeys(ts)
	} else {
		keys, segs = stateKeys(&c, ts)
	}

	b.str(`<svg`)
	if standalone {
		b.str(` xmlns="http://www.w3.org/2000/svg"`)
	}
	// As tall as its legend: a timeline has no value axis to fill the
	// height of the other charts.
	rows := max((len(keys)+legendCols-1)/legendCols, 1)
	b.str(` viewBox="0 0 480 `)
	b.num(legendY + float64(rows-1)*legendRow + 10)
	b.str(`" role="img" class="chart timeline`)
	if c.Events {
		b.str(` events`)
	}
	b.str(`" data-tz="`)
	b.text(c.Location.String())
	b.str(`" font-family="sans-serif" font-size="12"><title>`)
	b.text(c.Title)
	b.str(`</title><desc>`)
	b.text(c.describeTexts(ts, keys))
	b.str(`</desc>`)

	step := timeStep(c.To.Sub(c.From))
	ticks := timeTicks(c.From, c.To, step, c.Location)
	b.str(`<path class="grid" fill="none" stroke="#888" stroke-opacity=".3" d="`)
	b.str(laneFrame)
	for _, t := range ticks {
		b.str("M")
		b.pair(c.xOf(t), laneT)
		b.trim()
		b.str("V")
		b.num(laneB)
	}
	b.str(`"/>`)
	switch {
	case len(keys) == 0:
		b.str(noTexts)
	case c.Events:
		b.ticks(&c, ts, keys)
	default:
		b.bands(&c, segs, keys)
	}
	b.timeLabels(ticks, step, &c, laneLabelY)
	b.legend(&c, keys)
	b.str("</svg>\n")
}

// textCount is a text with its time and readings.
type textCount struct {
	text string
	dur  time.Duration
	n    int
}

// chooseKeys returns the keys of the texts: each its own when there
// are at most paletteLen of them, else the first paletteLen−1 in cs's
// order and the rest grouped as others. Each text's colour comes from
// a hash of it, or the next free one when texts of the chart would
// share one, the texts taking theirs in name order: a text keeps its
// colour from one refresh to the next while the texts shown stay.
func chooseKeys(cs []textCount) []key {
	own := cs
	var rest []textCount
	if len(cs) > paletteLen {
		own, rest = cs[:paletteLen-1], cs[paletteLen-1:]
	}
	keys := make([]key, len(own), len(own)+2)
	byName := make([]int, len(own))
	for i, tc := range own {
		keys[i] = key{text: tc.text, dur: tc.dur, n: tc.n}
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(keys[a].text, keys[b].text) })
	var taken [paletteLen]bool
	for _, i := range byName {
		h := fnv.New32a()
		h.Write([]byte(keys[i].text)) //nolint:errcheck // a hash.Hash never fails to write
		slot := int(h.Sum32() % uint32(paletteLen))
		for taken[slot] {
			slot = (slot + 1) % paletteLen
		}
		taken[slot] = true
		keys[i].color = palette[slot*7 : slot*7+7]
	}
	if len(rest) > 0 {
		o := key{color: othersColor, others: len(rest)}
		for _, tc := range rest {
			o.dur += tc.dur
			o.n += tc.n
		}
		keys = append(keys, o)
	}
	return keys
}

// keyOf returns the index in keys of text's key: its own, or that of
// others.
func keyOf(keys []key, index map[string]int, text string) int {
	if i, ok := index[text]; ok {
		return i
	}
	for i := range keys {
		if keys[i].others > 0 {
			return i
		}
	}
	return -1 // not reached: every text has a key
}

// stateKeys returns the keys of a series of states, the most time
// first (then unknown time, last), and the stretches of time in each
// key's state from From to To, stretches of one key merged.
func stateKeys(c *Chart, ts []Text) ([]key, []segment) {
	from, to := c.From.UnixNano(), c.To.UnixNano()
	// The stretches of each text, "" for unknown.
	type stretch struct {
		from, to int64
		text     string
	}
	ss := make([]stretch, 0, len(ts)+1)
	at, cur := from, c.Before
	for _, t := range ts {
		if ns := t.Time.UnixNano(); ns > at {
			ss = append(ss, stretch{at, ns, cur})
			at = ns
		}
		cur = t.Text
	}
	if at < to {
		ss = append(ss, stretch{at, to, cur})
	}
	tally := make(map[string]*textCount)
	var unknown time.Duration
	for _, s := range ss {
		if s.text == "" {
			unknown += time.Duration(s.to - s.from)
			continue
		}
		tc := tally[s.text]
		if tc == nil {
			tc = &textCount{text: s.text}
			tally[s.text] = tc
		}
		tc.dur += time.Duration(s.to - s.from)
	}
	for _, t := range ts {
		tc := tally[t.Text]
		if tc == nil {
			tc = &textCount{text: t.Text}
			tally[t.Text] = tc
		}
		tc.n++
	}
	cs := make([]textCount, 0, len(tally))
	for _, tc := range tally {
		cs = append(cs, *tc)
	}
	slices.SortFunc(cs, func(a, b textCount) int {
		return cmp.Or(cmp.Compare(b.dur, a.dur), cmp.Compare(b.n, a.n), strings.Compare(a.text, b.text))
	})
	keys := chooseKeys(cs)
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		if k.others == 0 {
			index[k.text] = i
		}
	}
	if unknown > 0 {
		keys = append(keys, key{color: unknownColor, unknown: true, dur: unknown})
	}
	var segs []segment
	for _, s := range ss {
		k := len(keys) - 1 // unknown
		if s.text != "" {
			k = keyOf(keys, index, s.text)
		}
		if n := len(segs); n > 0 && segs[n-1].k == k {
			segs[n-1].to = s.to
			continue
		}
		segs = append(segs, segment{s.from, s.to, k})
	}
	if len(segs) > MaxColumns {
		segs = columnize(segs, len(keys), from, to)
	}
	return keys, segs
}

// columnize draws segs, more than MaxColumns, as MaxColumns columns of
// equal width, each in the key with the most time within it, columns
// of one key merged: the bands are never more than the plot has
// columns, however many readings there are.
func columnize(segs []segment, nkeys int, from, to int64) []segment {
	span := to - from
	acc := make([]int64, nkeys)
	var out []segment
	j := 0
	for i := range int64(MaxColumns) {
		// span·MaxColumns fits an int64 for spans up to 1.5 years.
		cs, ce := from+span*i/MaxColumns, from+span*(i+1)/MaxColumns
		clear(acc)
		for ; j < len(segs); j++ {
			s := segs[j]
			if lo, hi := max(s.from, cs), min(s.to, ce); hi > lo {
				acc[s.k] += hi - lo
			}
			if s.to > ce {
				break
			}
		}
		best := 0
		for k, d := range acc {
			if d > acc[best] {
				best = k
			}
		}
		if n := len(out); n > 0 && out[n-1].k == best {
			out[n-1].to = ce
			continue
		}
		out = append(out, segment{cs, ce, best})
	}
	return out
}

// eventKeys returns the keys of a series of events, the most readings
// first.
func eventKeys(ts []Text) []key {
	tally := make(map[string]int)
	for _, t := range ts {
		tally[t.Text]++
	}
	cs := make([]textCount, 0, len(tally))
	for text, n := range tally {
		cs = append(cs, textCount{text: text, n: n})
	}
	slices.SortFunc(cs, func(a, b textCount) int {
		return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.text, b.text))
	})
	return chooseKeys(cs)
}

// bands writes a rectangle across the lane for each segment, in its
// key's colour, with its state in data-text and its <title>.
func (b *svgBuf) bands(c *Chart, segs []segment, keys []key) {
	b.str(`<g class="bands">`)
	for _, s := range segs {
		k := &keys[s.k]
		x0, x1 := c.xOf(time.Unix(0, s.from)), c.xOf(time.Unix(0, s.to))
		b.str(`<rect class="state`)
		b.str(k.class())
		b.str(`" x="`)
		b.num(x0)
		b.str(`" y="`)
		b.num(laneT)
		b.str(`" width="`)
		b.num(x1 - x0)
		b.str(`" height="`)
		b.num(laneB - laneT)
		b.str(`" fill="`)
		b.str(k.color)
		if k.unknown {
			b.str(`" fill-opacity=".2`)
		}
		b.str(`"`)
		if k.text != "" {
			b.str(` data-text="`)
			b.text(k.text)
			b.str(`"`)
		}
		b.str(`><title>`)
		b.text(k.name())
		b.str(`</title></rect>`)
	}
	b.str(`</g>`)
}

// ticks writes, for each key, a path of ticks across the lane at the
// times of its events, in the key's colour: a tick less than a column
// (two units) right of the key's last one is left out, so each path
// has at most one tick per column of the plot.
func (b *svgBuf) ticks(c *Chart, ts []Text, keys []key) {
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		if k.others == 0 {
			index[k.text] = i
		}
	}
	of := make([]int, len(ts)) // the key of each event
	for j, t := range ts {
		of[j] = keyOf(keys, index, t.Text)
	}
	b.str(`<g class="ticks">`)
	for i := range keys {
		k := &keys[i]
		b.str(`<path class="tick`)
		b.str(k.class())
		b.str(`" stroke="`)
		b.str(k.color)
		b.str(`" stroke-width="1.5"`)
		if k.text != "" {
			b.str(` data-text="`)
			b.text(k.text)
			b.str(`"`)
		}
		b.str(` d="`)
		last := -1.0
		for j, t := range ts {
			if of[j] != i {
				continue
			}
			x := c.xOf(t.Time)
			if last >= 0 && x-last < (plotR-plotL)/MaxColumns {
				continue
			}
			last = x
			b.str("M")
			b.pair(x, laneT+2)
			b.trim()
			b.str("V")
			b.num(laneB - 2)
		}
		b.str(`"><title>`)
		b.text(k.name())
		b.str(`</title></path>`)
	}
	b.str(`</g>`)
}

// legend writes the keys in rows of legendCols: a swatch, the text
// (cut to legendRunes) and its share of the time or its count, and the
// whole in a <title>.
func (b *svgBuf) legend(c *Chart, keys []key) {
	span := c.To.Sub(c.From)
	b.str(`<g class="legend">`)
	for i := range keys {
		k := &keys[i]
		x := float64(plotL + i%legendCols*legendColW)
		y := float64(legendY + i/legendCols*legendRow)
		b.str(`<g class="key`)
		b.str(k.class())
		b.str(`"`)
		if k.text != "" {
			b.str(` data-text="`)
			b.text(k.text)
			b.str(`"`)
		}
		b.str(`><rect x="`)
		b.num(x)
		b.str(`" y="`)
		b.num(y - 9)
		b.str(`" width="10" height="10" fill="`)
		b.str(k.color)
		if k.unknown {
			b.str(`" fill-opacity=".2" stroke="#888`)
		}
		b.str(`"/><text x="`)
		b.num(x + 14)
		b.str(`" y="`)
		b.num(y)
		b.str(`">`)
		b.text(cut(k.name(), legendRunes))
		b.str(" ")
		if c.Events {
			b.str(formatCount(uint64(k.n)))
		} else {
			b.str(share(k.dur, span))
		}
		b.str(`</text><title>`)
		b.text(k.name())
		b.str(": ")
		if c.Events {
			b.str(formatCount(uint64(k.n)) + " " + Plural(k.n, "event", "events"))
		} else {
			b.str(share(k.dur, span) + " of the time")
			if !k.unknown {
				b.str(", " + formatCount(uint64(k.n)) + " " + Plural(k.n, "reading", "readings"))
			}
		}
		b.str(`</title></g>`)
	}
	b.str(`</g>`)
}

// cut returns s, or its first n runes and an ellipsis when it is
// longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if n == 0 {
			i = k
			break
		}
		n--
	}
	return s[:i] + "…"
}

// share writes d as a whole percentage of span: "45 %", and "<1 %" for
// a share that is not nothing but rounds to it.
func share(d, span time.Duration) string {
	if span <= 0 {
		return "0 %"
	}
	p := float64(d) / float64(span) * 100
	if d > 0 && p < 0.5 {
		return "<1 %"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + " %"
}

// describeTexts says in words what the chart of a text series shows,
// for its <desc>: each state's share of the time, or each event's
// count, and the latest reading.
func (c *Chart) describeTexts(ts []Text, keys []key) string {
	const stamp = "Jan 2 15:04 MST"
	words := c.Title + ", the " + spanWords(c.To.Sub(c.From)) + " from " +
		c.From.In(c.Location).Format(stamp) + " to " + c.To.In(c.Location).Format(stamp)
	if len(keys) == 0 {
		return words + ": no data."
	}
	span := c.To.Sub(c.From)
	parts := make([]string, len(keys))
	total := 0
	for i := range keys {
		k := &keys[i]
		if c.Events {
			parts[i] = k.name() + " " + formatCount(uint64(k.n))
			total += k.n
		} else {
			parts[i] = k.name() + " " + share(k.dur, span)
		}
	}
	if c.Events {
		words += ": " + formatCount(uint64(total)) + " " + Plural(total, "event", "events") + ", " + strings.Join(parts, ", ")
	} else {
		words += ": " + strings.Join(parts, ", ") + " of the time"
	}
	if n := len(ts); n > 0 {
		words += "; latest " + ts[n-1].Text + " (" + ts[n-1].Time.In(c.Location).Format(stamp) + ")"
	}
	if c.Truncated && len(ts) > 0 {
		words += "; readings before " + ts[0].Time.In(c.Location).Format(stamp) + " left out, too many to draw"
	}
	return words + "."
}
