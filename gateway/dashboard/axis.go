package dashboard

import (
	"math"
	"strconv"
	"time"
)

// valueAxis is the y axis of a chart: from Lo to Hi, with a tick at every
// multiple of Step between them, labelled with Decimals decimals.
type valueAxis struct {
	Lo, Hi, Step float64
	Decimals     int
}

// yTicks is about how many intervals a value axis is split into.
const yTicks = 4

// newValueAxis returns the axis for values from lo to hi (lo <= hi): its
// ends are the multiples of a 1-2-5 step (1, 2, 5, 10, 20, …) just
// outside lo and hi. A flat range (lo == hi) is widened by a tenth of
// its value on either side, or by 1 around zero, so that the line lies
// in the middle of a labelled span rather than on a zero-height one.
func newValueAxis(lo, hi float64) valueAxis {
	if lo == hi {
		pad := math.Abs(lo) / 10
		if pad == 0 {
			pad = 1
		}
		lo, hi = lo-pad, hi+pad
	}
	span := hi - lo
	if math.IsInf(span, 0) || math.IsNaN(span) || span <= 0 {
		// Beyond what float64 can subtract: one interval, no step.
		return valueAxis{Lo: lo, Hi: hi, Step: 0, Decimals: 0}
	}
	step := niceStep(span / yTicks)
	a := valueAxis{
		Lo:   math.Floor(lo/step) * step,
		Hi:   math.Ceil(hi/step) * step,
		Step: step,
	}
	if step < 1 {
		// Divide by the whole 1/step: 328/100 is 3.28, 328×0.01 is not.
		inv := math.Round(1 / step)
		a.Lo, a.Hi = math.Floor(lo*inv)/inv, math.Ceil(hi*inv)/inv
	}
	if a.Lo == a.Hi { // a span below the precision of the values
		a.Hi = a.Lo + step
	}
	if d := -math.Floor(math.Log10(step) + 1e-9); d > 0 {
		a.Decimals = int(d)
	}
	return a
}

// niceStep returns the smallest 1, 2 or 5 times a power of ten that is
// at least raw, which must be positive and finite.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	f := raw / p
	switch {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

// ticks returns the values of the axis's ticks, from Lo to Hi.
func (a valueAxis) ticks() []float64 {
	if a.Step == 0 {
		return []float64{a.Lo, a.Hi}
	}
	var ts []float64
	for i := 0; i <= 2*yTicks+2; i++ {
		v := a.Lo + float64(i)*a.Step
		if v > a.Hi+a.Step/2 {
			break
		}
		ts = append(ts, v)
	}
	return ts
}

// label formats a tick's value with the axis's decimals.
func (a valueAxis) label(v float64) string {
	return trimNegZero(strconv.FormatFloat(v, 'f', a.Decimals, 64))
}

// trimNegZero turns "-0", "-0.0", … into "0", "0.0", ….
func trimNegZero(s string) string {
	if len(s) > 1 && s[0] == '-' {
		for _, c := range s[1:] {
			if c != '0' && c != '.' {
				return s
			}
		}
		return s[1:]
	}
	return s
}

// FormatValue formats a reading for people: integers as they are, other
// values with about four significant digits (at most four decimals),
// very large or very small ones in exponent form.
func FormatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && a < 1e15:
		return trimNegZero(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 1e6 || a < 1e-3:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	dec := 3 - int(math.Floor(math.Log10(a)))
	dec = min(max(dec, 1), 4)
	s := strconv.FormatFloat(v, 'f', dec, 64)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return trimNegZero(s)
}

const day = 24 * time.Hour

// maxTimeTicks is the most intervals between time ticks: with 7, labels
// of a date ("Nov 27") 57 units apart do not touch. Times of day ("11:45
// PM") are wider: there is no 10-minute step, so that an hour has four
// intervals of 15 minutes rather than six of 10.
const maxTimeTicks = 7

// timeStep returns the spacing of the time ticks of a span: the shortest
// of 1, 2, 5, 15, 30 minutes, 1, 2, 3, 6, 12 hours, 1, 2, 7, 14, 28,
// 91, 182, 364 days that gives at most maxTimeTicks intervals.
func timeStep(span time.Duration) time.Duration {
	steps := [...]time.Duration{
		time.Minute, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
		day, 2 * day, 7 * day, 14 * day, 28 * day, 91 * day, 182 * day, 364 * day,
	}
	for _, s := range steps {
		if span/s <= maxTimeTicks {
			return s
		}
	}
	return steps[len(steps)-1]
}

// timeTicks returns the times in [from, to] that are whole multiples of
// step on loc's wall clock: for a step under a day, the times whose time
// of day is a multiple of step (so that 6 h ticks fall on 00:00, 06:00,
// … of loc even across a change to or from summer time); for a step of
// days, loc's midnights, every step days counted from Monday 1970-01-05.
// It returns at most 2·maxTimeTicks+2 times.
func timeTicks(from, to time.Time, step time.Duration, loc *time.Location) []time.Time {
	const most = 2*maxTimeTicks + 2
	var ts []time.Time
	if step >= day {
		n := int(step / day)
		l := from.In(loc)
		d := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
		if d.Before(from) {
			d = time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
		}
		// Days since Monday 1970-01-05 of d's date, as a calendar count.
		y, m, dd := d.Date()
		num := int(time.Date(y, m, dd, 0, 0, 0, 0, time.UTC).Unix()/86400) - 4
		skip := ((-num)%n + n) % n
		for k := skip; len(ts) < most; k += n {
			t := time.Date(y, m, dd+k, 0, 0, 0, 0, loc)
			if t.After(to) {
				break
			}
			ts = append(ts, t)
		}
		return ts
	}
	// Every zone's offset is a whole number of minutes, and of quarter
	// hours but for a few historical ones: walking by a minute (short
	// steps) or a quarter hour finds every tick.
	walk := time.Minute
	if step >= 15*time.Minute {
		walk = 15 * time.Minute
	}
	t := from.Truncate(walk)
	if t.Before(from) {
		t = t.Add(walk)
	}
	secs := int(step / time.Second)
	for ; !t.After(to) && len(ts) < most; t = t.Add(walk) {
		h, m, s := t.In(loc).Clock()
		if (h*3600+m*60+s)%secs == 0 {
			ts = append(ts, t)
		}
	}
	return ts
}

// timeLabel returns the fallback text of a time tick in loc, and the
// format the page's script uses to write it in the browser's zone: "d"
// (a date) for steps of days and for midnight, "t" (a time of day)
// otherwise.
func timeLabel(t time.Time, step time.Duration, loc *time.Location) (text, format string) {
	l := t.In(loc)
	if step >= day || (l.Hour() == 0 && l.Minute() == 0) {
		return l.Format("Jan 2"), "d"
	}
	return l.Format("15:04"), "t"
}

// spanWords names a span of time: "1 hour", "24 hours", "7 days", "90
// minutes", whichever unit divides it, else hours with a fraction.
func spanWords(d time.Duration) string {
	unit := func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.FormatInt(n, 10) + " " + many
	}
	switch {
	case d > day && d%day == 0:
		return unit(int64(d/day), "day", "days")
	case d >= time.Hour && d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour", "hours")
	case d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute", "minutes")
	}
	return strconv.FormatFloat(d.Hours(), 'f', 2, 64) + " hours"
}
