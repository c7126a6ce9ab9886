package dashboard

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/aggregate"
)

// Bucket is the Stats of one record of a series: the readings of one
// Level-long stretch of time starting at Start.
type Bucket struct {
	Start time.Time
	Stats aggregate.Stats
}

// Point is one raw reading.
type Point struct {
	Time  time.Time
	Value float64
}

// Chart is one metric of one device over a span of time, as WriteChart
// draws it.
type Chart struct {
	// Title names what is charted, e.g. "kitchen: temperature"; it is the
	// chart's <title> and starts its <desc>.
	Title string
	// Unit is the metric's unit, written atop the value axis and after
	// the values of the <desc>; empty for none.
	Unit string
	// From and To bound the time axis (From before To).
	From, To time.Time
	// Level is the length of each Bucket's record.
	Level aggregate.Level
	// Buckets are the records of the series from From to To, at most one
	// per Start; any order. A stretch with no record is a gap: the chart
	// draws nothing there. Buckets outside [From, To) are left out.
	Buckets []Bucket
	// Points are raw readings, in time order, drawn over the band when
	// there are at most 4·MaxColumns of them in [From, To] (with a dot
	// each when at most MaxColumns); the caller gives them for short
	// ranges only (Range.Raw).
	Points []Point
	// Location is the zone whose wall clock the time ticks fall on (6 h
	// ticks at its 00:00, 06:00, …; day ticks at its midnights) and
	// whose time the labels' fallback text is written in; nil is UTC. The
	// labels also carry the time itself (data-t, Unix milliseconds), for
	// the page's script to write in the browser's zone.
	Location *time.Location

	// Texts, when a chart has any (or has Before), make it the chart of
	// a text series instead (WriteChart draws no value axis then, and
	// ignores Buckets and Points): its readings in time order, those
	// outside [From, To] left out. A series of states is drawn as a
	// timeline of bands, one colour per state, each state lasting from
	// its reading until the next (the last one until To); a series of
	// events (Events) as a tick at each event. A legend names each state
	// with its share of the chart's time, or each event with its count.
	// The caller bounds them: the page reads at most MaxTexts.
	Texts []Text
	// Events says that Texts are events, drawn as ticks, rather than
	// states (IsEvent of the metric).
	Events bool
	// Before is the state in force at From: the text of the series'
	// last reading before From. "" is unknown: the time before the
	// first of Texts is drawn as unknown.
	Before string
	// Truncated says that the series has older readings in [From, To]
	// than the first of Texts, left out because there were too many:
	// the chart says so in its <desc>, and the time before the first of
	// Texts is unknown.
	Truncated bool
}

// Text is one reading of a text series: a state or an event.
type Text struct {
	Time time.Time
	Text string
}

// The chart's geometry, in the units of its viewBox (480 × 200): the
// plot area's edges and the baseline of the time labels.
const (
	plotL, plotR = 52, 440
	plotT, plotB = 20, 176
	timeLabelY   = 192

	// frame is the path of the plot area's edges.
	frame = "M52 20H440V176H52Z"
	// noData is the text written in the plot area of a chart without data.
	noData = `<text class="none" x="246" y="102" text-anchor="middle">no data</text>`
)

// MaxColumns is the most columns a chart draws: one per two units of its
// 388-unit-wide plot, about one per pixel when the chart is as wide as a
// phone's screen. (The 40 units right of the plot leave room for the
// last time label, up to 80 units wide.) Buckets finer than (To−From)/MaxColumns are merged
// into columns of a whole number of records, the shortest of 1, 2, 5,
// 10, 15, 30 minutes, 1, 2, 3, 4, 6, 8, 12 hours, 1, 2, 7, 14, 28 days
// that is long enough: 24 hours of minutes make 144 columns of 10
// minutes, 90 days of hours (or of minutes) 180 columns of 12 hours.
const MaxColumns = (plotR - plotL) / 2

// WriteChart writes c as a standalone SVG document (an <svg> element with
// its namespace): the min–max band and the mean line of every column,
// gaps where a column has no record, the raw points, a value axis with
// 1-2-5 ticks and the unit, and a time axis whose labels name their time
// in data-t. A chart with Texts (or Before) is a timeline instead: the
// bands of its states or the ticks of its events, and their legend (see
// Chart.Texts). It is an error if From is not before To or Level is not
// a Level.
func WriteChart(w io.Writer, c Chart) error {
	var b svgBuf
	if err := b.chart(c, true); err != nil {
		return err
	}
	_, err := w.Write(b.b)
	return err
}

// ErrBadChart is wrapped by the error WriteChart returns for a Chart it
// cannot draw: From not before To, or a Level that is not one.
var ErrBadChart = errors.New("dashboard: bad chart")

// column is the merged Stats of the records within one column.
type column struct {
	x float64 // the column's middle, within the plot
	s aggregate.Stats
}

// columns merges c's buckets into columns, and returns them with their
// width.
func (c *Chart) columns() ([]column, time.Duration) {
	lvl := c.Level.Duration()
	span := c.To.Sub(c.From)
	need := (span + MaxColumns - 1) / MaxColumns
	width := lvl
	if need > lvl {
		width = (need + lvl - 1) / lvl * lvl
		for _, m := range [...]time.Duration{
			time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
			15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
			3 * time.Hour, 4 * time.Hour, 6 * time.Hour, 8 * time.Hour,
			12 * time.Hour, day, 2 * day, 7 * day, 14 * day, 28 * day,
		} {
			if m >= need && m%lvl == 0 {
				width = m
				break
			}
		}
	}
	// Columns lie on the UTC grid of their width, as records do.
	origin := c.From.Truncate(width)
	n := int((c.To.Sub(origin) + width - 1) / width)
	cols := make([]column, n)
	for i := range cols {
		mid := origin.Add(time.Duration(i)*width + width/2)
		cols[i].x = min(max(c.xOf(mid), plotL), plotR)
	}
	// In nanoseconds, which are cheaper to compare than Times.
	first, to := c.From.Truncate(lvl).UnixNano(), c.To.UnixNano()
	o, wd := origin.UnixNano(), int64(width)
	for i := range c.Buckets {
		b := &c.Buckets[i]
		if b.Stats.Count == 0 {
			continue
		}
		if t := b.Start.UnixNano(); t >= first && t < to {
			cols[(t-o)/wd].s.Merge(b.Stats)
		}
	}
	return cols, width
}

// xOf returns the x of time t.
func (c *Chart) xOf(t time.Time) float64 {
	return plotL + float64(t.Sub(c.From))/float64(c.To.Sub(c.From))*(plotR-plotL)
}

// points returns the Points within [From, To] that are drawn.
func (c *Chart) points() []Point {
	lo, hi := 0, len(c.Points)
	for lo < hi && c.Points[lo].Time.Before(c.From) {
		lo++
	}
	for hi > lo && c.Points[hi-1].Time.After(c.To) {
		hi--
	}
	ps := c.Points[lo:hi]
	if len(ps) > 4*MaxColumns {
		return nil
	}
	return ps
}

// summary is what a chart's <desc> says in words.
type summary struct {
	have             bool
	lo, hi, latest   float64
	loAt, hiAt, atAt time.Time
	gaps             int
}

// chart writes c into b, with the SVG namespace when standalone.
func (b *svgBuf) chart(c Chart, standalone bool) error {
	if !c.From.Before(c.To) {
		return fmt.Errorf("%w %q: From %v is not before To %v", ErrBadChart, c.Title, c.From, c.To)
	}
	if c.Level != aggregate.Minute && c.Level != aggregate.Hour && c.Level != aggregate.Day {
		return fmt.Errorf("%w %q: %v", ErrBadChart, c.Title, c.Level)
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	if c.isText() {
		b.timeline(c, standalone)
		return nil
	}
	cols, width := c.columns()
	pts := c.points()
	sum := summarize(cols, width, pts, c.From)
	ax := newValueAxis(sum.lo, sum.hi)
	yOf := func(v float64) float64 {
		// Halves, so that values near ±MaxFloat64 do not overflow.
		return plotB - (v/2-ax.Lo/2)/(ax.Hi/2-ax.Lo/2)*(plotB-plotT)
	}

	b.str(`<svg`)
	if standalone {
		b.str(` xmlns="http://www.w3.org/2000/svg"`)
	}
	b.str(` viewBox="0 0 480 200" role="img" class="chart" data-tz="`)
	b.text(c.Location.String())
	b.str(`" font-family="sans-serif" font-size="12"><title>`)
	b.text(c.Title)
	b.str(`</title><desc>`)
	b.text(c.describe(sum))
	b.str(`</desc>`)

	step := timeStep(c.To.Sub(c.From))
	ticks := timeTicks(c.From, c.To, step, c.Location)
	b.grid(ax, sum.have, yOf, ticks, &c)
	if sum.have {
		b.series(cols, yOf)
		b.raw(pts, width, yOf, &c)
	} else {
		b.str(noData)
	}
	b.labels(ax, sum.have, yOf, ticks, step, &c)
	b.str("</svg>\n")
	return nil
}

// summarize finds the lowest, highest and latest values of the columns
// and points, and counts the gaps between columns with data.
func summarize(cols []column, width time.Duration, pts []Point, from time.Time) summary {
	var s summary
	origin := from.Truncate(width)
	last := -1
	for i, col := range cols {
		if col.s.Count == 0 {
			continue
		}
		at := origin.Add(time.Duration(i) * width)
		if !s.have || col.s.Min < s.lo {
			s.lo, s.loAt = col.s.Min, at
		}
		if !s.have || col.s.Max > s.hi {
			s.hi, s.hiAt = col.s.Max, at
		}
		if last >= 0 && i > last+1 {
			s.gaps++
		}
		s.have, last = true, i
		s.latest, s.atAt = col.s.Mean(), at
	}
	for _, p := range pts {
		if !s.have || p.Value < s.lo {
			s.lo, s.loAt = p.Value, p.Time
		}
		if !s.have || p.Value > s.hi {
			s.hi, s.hiAt = p.Value, p.Time
		}
		s.have = true
	}
	if n := len(pts); n > 0 && !pts[n-1].Time.Before(s.atAt) {
		s.latest, s.atAt = pts[n-1].Value, pts[n-1].Time
	}
	return s
}

// describe says in words what the chart shows, for its <desc>.
func (c *Chart) describe(s summary) string {
	const stamp = "Jan 2 15:04 MST"
	words := c.Title + ", the " + spanWords(c.To.Sub(c.From)) + " from " +
		c.From.In(c.Location).Format(stamp) + " to " + c.To.In(c.Location).Format(stamp)
	if !s.have {
		return words + ": no data."
	}
	words += ": lowest " + c.withUnit(s.lo) + " (" + s.loAt.In(c.Location).Format(stamp) +
		"), highest " + c.withUnit(s.hi) + " (" + s.hiAt.In(c.Location).Format(stamp) +
		"), latest " + c.withUnit(s.latest) + " (" + s.atAt.In(c.Location).Format(stamp) + ")"
	switch s.gaps {
	case 0:
		return words + "."
	case 1:
		return words + "; 1 gap without data."
	}
	return words + "; " + strconv.Itoa(s.gaps) + " gaps without data."
}

// withUnit formats v followed by the chart's unit.
func (c *Chart) withUnit(v float64) string {
	if c.Unit == "" {
		return FormatValue(v)
	}
	return FormatValue(v) + " " + c.Unit
}

// grid writes the horizontal lines of the value ticks (a stronger one at
// zero) and the vertical lines of the time ticks.
func (b *svgBuf) grid(ax valueAxis, have bool, yOf func(float64) float64, ticks []time.Time, c *Chart) {
	b.str(`<path class="grid" fill="none" stroke="#888" stroke-opacity=".3" d="`)
	b.str(frame)
	zero := false
	if have {
		for _, v := range ax.ticks() {
			if v == 0 {
				zero = v > ax.Lo && v < ax.Hi
				continue
			}
			b.str("M")
			b.pair(plotL, yOf(v))
			b.trim()
			b.str("H")
			b.num(plotR)
		}
	}
	for _, t := range ticks {
		b.str("M")
		b.pair(c.xOf(t), plotT)
		b.trim()
		b.str("V")
		b.num(plotB)
	}
	b.str(`"/>`)
	if zero {
		b.str(`<path class="zero" stroke="#888" d="M`)
		b.pair(plotL, yOf(0))
		b.trim()
		b.str(`H`)
		b.num(plotR)
		b.str(`"/>`)
	}
}

// series writes the band and the mean line of every run of columns with
// data, and a bar and a dot for a run of one column.
func (b *svgBuf) series(cols []column, yOf func(float64) float64) {
	type run struct{ i, j int } // cols[i:j] have data
	var runs []run
	for i := 0; i < len(cols); {
		if cols[i].s.Count == 0 {
			i++
			continue
		}
		j := i + 1
		for j < len(cols) && cols[j].s.Count > 0 {
			j++
		}
		runs = append(runs, run{i, j})
		i = j
	}
	multi, single := false, false
	for _, r := range runs {
		multi = multi || r.j-r.i > 1
		single = single || r.j-r.i == 1
	}
	if multi {
		b.str(`<path class="band" fill="#3b82f6" fill-opacity=".3" d="`)
		for _, r := range runs {
			if r.j-r.i < 2 {
				continue
			}
			b.str("M")
			for k := r.i; k < r.j; k++ {
				b.pair(cols[k].x, yOf(cols[k].s.Max))
			}
			for k := r.j - 1; k >= r.i; k-- {
				b.pair(cols[k].x, yOf(cols[k].s.Min))
			}
			b.trim()
			b.str("Z")
		}
		b.str(`"/><path class="mean" fill="none" stroke="#1d4ed8" stroke-width="1.5" stroke-linejoin="round" d="`)
		for _, r := range runs {
			if r.j-r.i < 2 {
				continue
			}
			b.str("M")
			for k := r.i; k < r.j; k++ {
				b.pair(cols[k].x, yOf(cols[k].s.Mean()))
			}
			b.trim()
		}
		b.str(`"/>`)
	}
	if !single {
		return
	}
	b.str(`<path class="band1" stroke="#3b82f6" stroke-opacity=".45" stroke-width="5" d="`)
	for _, r := range runs {
		if r.j-r.i == 1 {
			col := cols[r.i]
			b.str("M")
			b.pair(col.x, yOf(col.s.Max))
			b.trim()
			b.str("V")
			b.num(yOf(col.s.Min))
		}
	}
	b.str(`"/><path class="mean1" stroke="#1d4ed8" stroke-width="5" stroke-linecap="round" d="`)
	for _, r := range runs {
		if r.j-r.i == 1 {
			col := cols[r.i]
			b.str("M")
			b.pair(col.x, yOf(col.s.Mean()))
			b.trim()
			b.str("h0")
		}
	}
	b.str(`"/>`)
}

// raw writes the raw points as a line and, when they are few, as dots.
// The line is broken where two points are further apart than two
// columns and than three times the median spacing of the points: a
// sensor that reports every 5 minutes has a line on a chart of minutes.
func (b *svgBuf) raw(pts []Point, width time.Duration, yOf func(float64) float64, c *Chart) {
	if len(pts) == 0 {
		return
	}
	gap := max(2*width, 3*medianSpacing(pts))
	b.str(`<path class="raw" fill="none" stroke="#c2410c" stroke-width="1" stroke-linejoin="round" d="`)
	for i, p := range pts {
		if i == 0 || p.Time.Sub(pts[i-1].Time) > gap {
			b.trim()
			b.str("M")
		}
		b.pair(c.xOf(p.Time), yOf(p.Value))
	}
	b.trim()
	b.str(`"/>`)
	if len(pts) > MaxColumns {
		return
	}
	b.str(`<path class="dots" stroke="#c2410c" stroke-width="3" stroke-linecap="round" d="`)
	for _, p := range pts {
		b.str("M")
		b.pair(c.xOf(p.Time), yOf(p.Value))
		b.trim()
		b.str("h0")
	}
	b.str(`"/>`)
}

// medianSpacing returns the median time between consecutive points, 0
// for fewer than two.
func medianSpacing(pts []Point) time.Duration {
	if len(pts) < 2 {
		return 0
	}
	ds := make([]time.Duration, len(pts)-1)
	for i := range ds {
		ds[i] = pts[i+1].Time.Sub(pts[i].Time)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// labels writes the value ticks' labels, the unit above them, and the
// time ticks' labels with their times in data-t.
func (b *svgBuf) labels(ax valueAxis, have bool, yOf func(float64) float64, ticks []time.Time, step time.Duration, c *Chart) {
	if have {
		b.str(`<g class="ylab" text-anchor="end">`)
		for _, v := range ax.ticks() {
			b.str(`<text x="`)
			b.num(plotL - 5)
			b.str(`" y="`)
			b.num(yOf(v) + 4)
			b.str(`">`)
			b.text(ax.label(v))
			b.str(`</text>`)
		}
		b.str(`</g>`)
	}
	if c.Unit != "" {
		b.str(`<text class="unit" x="4" y="12">`)
		b.text(c.Unit)
		b.str(`</text>`)
	}
	b.timeLabels(ticks, step, c, timeLabelY)
}

// timeLabels writes the time ticks' labels at baseline y, with their
// times in data-t.
func (b *svgBuf) timeLabels(ticks []time.Time, step time.Duration, c *Chart, y float64) {
	b.str(`<g class="xlab" text-anchor="middle">`)
	for _, t := range ticks {
		text, format := timeLabel(t, step, c.Location)
		b.str(`<text x="`)
		b.num(c.xOf(t))
		b.str(`" y="`)
		b.num(y)
		b.str(`" data-t="`)
		b.b = strconv.AppendInt(b.b, t.UnixMilli(), 10)
		b.str(`" data-f="`)
		b.str(format)
		b.str(`">`)
		b.text(text)
		b.str(`</text>`)
	}
	b.str("</g>")
}

// svgBuf is an SVG document being written.
type svgBuf struct{ b []byte }

func (b *svgBuf) str(s string) { b.b = append(b.b, s...) }

// num writes v rounded to a tenth of a unit, as AppendFloat would the
// rounded value but faster. v is within a few times the viewBox.
func (b *svgBuf) num(v float64) {
	n := int64(math.Round(min(max(v, -1e9), 1e9) * 10))
	if n < 0 {
		b.b = append(b.b, '-')
		n = -n
	}
	b.b = strconv.AppendInt(b.b, n/10, 10)
	if d := n % 10; d != 0 {
		b.b = append(b.b, '.', byte('0'+d))
	}
}

// pair writes "x y " for a path.
func (b *svgBuf) pair(x, y float64) {
	b.num(x)
	b.b = append(b.b, ' ')
	b.num(y)
	b.b = append(b.b, ' ')
}

// trim drops a trailing space.
func (b *svgBuf) trim() {
	if n := len(b.b); n > 0 && b.b[n-1] == ' ' {
		b.b = b.b[:n-1]
	}
}

// text writes s escaped as XML character data or an attribute value.
// Bytes that are not valid UTF-8 and control characters XML does not
// allow become U+FFFD.
func (b *svgBuf) text(s string) {
	for _, r := range s {
		switch {
		case r == '<':
			b.str("&lt;")
		case r == '>':
			b.str("&gt;")
		case r == '&':
			b.str("&amp;")
		case r == '"':
			b.str("&#34;")
		case r == '\'':
			b.str("&#39;")
		case r == utf8.RuneError, r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF:
			b.str("\uFFFD")
		default:
			b.b = utf8.AppendRune(b.b, r)
		}
	}
}
