package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// series is one figure of the soak: how to read it from a sample, and the
// rule by which its last half is flat.
type series struct {
	key, title, unit string
	value            func(sample) float64
	// second is drawn beside value in its panel (VmHWM beside VmRSS,
	// the directory beside cairn's count of its files), not judged.
	second      func(sample) float64
	secondTitle string
	limit       float64 // a horizontal line in the panel (the cap), if > 0
	// judge says whether the series is flat, and the rule in words.
	judge func(f fit, all []sample) (bool, string)
}

// fit is a series over the last half of the run.
type fit struct {
	slope, intercept float64 // per hour; value at t = 0 h
	mean, min, max   float64
	rangePct         float64 // (max - min) / mean, in percent
	// earlyMin and earlyMax are the lowest and highest values of the
	// last half's first half (the run's third quarter), lateMin and
	// lateMax of its second half (the fourth).
	earlyMin, earlyMax, lateMin, lateMax float64
	n                                    int
	first, last, start                   float64 // values at the first and last sample of the half; start of the half in hours
}

type result struct {
	s    series
	f    fit
	flat bool
	line string
}

func lastHalf(s *settings, all []sample, value func(sample) float64) fit {
	half := s.duration.Hours() / 2
	var xs, ys []float64
	for _, x := range all {
		if h := x.t / 3600; h >= half-1e-9 {
			xs = append(xs, h)
			ys = append(ys, value(x))
		}
	}
	f := fit{n: len(xs), min: math.Inf(1), max: math.Inf(-1), start: half,
		earlyMin: math.Inf(1), earlyMax: math.Inf(-1), lateMin: math.Inf(1), lateMax: math.Inf(-1)}
	if f.n == 0 {
		return f
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		f.min = min(f.min, ys[i])
		f.max = max(f.max, ys[i])
		if xs[i] < half*3/2 {
			f.earlyMin, f.earlyMax = min(f.earlyMin, ys[i]), max(f.earlyMax, ys[i])
		} else {
			f.lateMin, f.lateMax = min(f.lateMin, ys[i]), max(f.lateMax, ys[i])
		}
	}
	mx, my := sx/float64(f.n), sy/float64(f.n)
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx > 0 {
		f.slope = sxy / sxx
	}
	f.intercept = my - f.slope*mx
	f.mean = my
	if my != 0 {
		f.rangePct = (f.max - f.min) / math.Abs(my) * 100
	}
	f.first, f.last = ys[0], ys[len(ys)-1]
	return f
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// figures are the series of the soak and their rules. The rules are for a
// run of an hour or more; a shorter one extrapolates a few minutes' noise
// to an hour.
func figures(s *settings) []series {
	capMiB := float64(s.capBytes) / (1 << 20)
	backAt := (s.outageAt + s.outage + 2*retryWaitMax).Seconds()
	return []series{
		{key: "rss_mib", title: "VmRSS", unit: "MiB", value: func(x sample) float64 { return x.rssMiB },
			second: func(x sample) float64 { return x.hwmMiB }, secondTitle: "VmHWM",
			// VmRSS climbs by a few MiB between memtable flushes (each a
			// few minutes apart at this load) and falls at each: a
			// sawtooth, whose range says nothing of a leak and which tilts
			// a least-squares line through a half hour by MiB an hour
			// either way. A leak lifts what the sawtooth falls back to:
			// the fit is of the lowest value of each 10 minutes (floor),
			// and the last quarter's highs may not climb above the third's.
			// Both are of VmRSS without the pages of the store's files
			// that Badger maps (ownRSS): those follow the store, which
			// grows through the first hour of retention and which the cap
			// bounds, and the kernel takes them back when it needs them.
			judge: func(_ fit, all []sample) (bool, string) {
				own := lastHalf(s, all, ownRSS)
				floor := lastHalf(s, trailingMin(all, s.sample, rssFloorWindow, ownRSS), ownRSS)
				vmRSS := func(x sample) float64 { return x.rssMiB }
				vm := lastHalf(s, trailingMin(all, s.sample, rssFloorWindow, vmRSS), vmRSS)
				what := "VmRSS without the store's mapped files"
				if math.IsNaN(all[0].rssStoreMiB) {
					what = "VmRSS" // a soak.csv from before they were sampled
				}
				return floor.slope < 1 && own.lateMax <= own.earlyMax+0.05*own.mean,
					fmt.Sprintf("%s: slope of its %s floor (%.3g MiB/h) < 1 MiB/h, and the last quarter's highest (%.4g) no more than 5%% of the last-half mean above the third quarter's (%.4g); VmRSS's floor %.3g MiB/h, not judged",
						what, rssFloorWindow, floor.slope, own.lateMax, own.earlyMax, vm.slope)
			}},
		{key: "goroutines", title: "goroutines", unit: "", value: func(x sample) float64 { return x.goroutines },
			judge: func(f fit, _ []sample) (bool, string) {
				return math.Abs(f.slope) < 5 && f.max-f.min <= 10, "|slope| < 5/h and last-half range <= 10"
			}},
		{key: "open_files", title: "open files", unit: "", value: func(x sample) float64 { return x.fds },
			judge: func(f fit, _ []sample) (bool, string) {
				return math.Abs(f.slope) < 5 && f.max-f.min <= 10, "|slope| < 5/h and last-half range <= 10"
			}},
		{key: "store_disk_mib", title: "store (cairn's files)", unit: "MiB", value: func(x sample) float64 { return x.storeMiB },
			second: func(x sample) float64 { return x.dirMiB }, secondTitle: "data dir (du, without the reserve file)", limit: capMiB,
			judge: func(_ fit, all []sample) (bool, string) {
				ok := true
				for _, x := range all {
					ok = ok && x.storeMiB <= capMiB
				}
				return ok, fmt.Sprintf("every sample <= max_disk_bytes (%.0f MiB)", capMiB)
			}},
		{key: "pending_readings", title: "upstream backlog", unit: "readings", value: func(x sample) float64 { return x.pending },
			judge: func(_ fit, all []sample) (bool, string) {
				ok := len(all) > 0 && all[len(all)-1].pending <= pendingNear
				for _, x := range all {
					if x.t >= backAt {
						ok = ok && x.pending <= pendingNear
					}
				}
				return ok, fmt.Sprintf("<= %d (5 s of ingest) at every sample from %s after the upstream's return, and at the end",
					pendingNear, 2*retryWaitMax)
			}},
		{key: "commit_ms", title: "commit time (mean over the sample)", unit: "ms", value: func(x sample) float64 { return x.commitMS },
			judge: func(f fit, _ []sample) (bool, string) {
				return math.Abs(f.slope) < max(1, 0.5*f.mean), "|slope| < 1 ms/h or < 50% of its last-half mean per hour"
			}},
	}
}

// rssFloorWindow is the window of VmRSS's floor: longer than the time
// between two memtable flushes in the soak.
const rssFloorWindow = 10 * time.Minute

// ownRSS is cairn's VmRSS without the pages of the store's files it
// maps (its heap, stacks and the binary's pages), or VmRSS where the
// sample has no breakdown.
func ownRSS(x sample) float64 {
	if math.IsNaN(x.rssStoreMiB) {
		return x.rssMiB
	}
	return x.rssMiB - x.rssStoreMiB
}

// trailingMin returns all with each sample's rssMiB and rssStoreMiB such
// that value gives the lowest value of it and the samples of the window
// before it.
func trailingMin(all []sample, every, window time.Duration, value func(sample) float64) []sample {
	n := 1
	if every > 0 {
		n = max(1, int(window/every))
	}
	out := make([]sample, len(all))
	for i := range all {
		low := all[i]
		for j := max(0, i-n+1); j < i; j++ {
			if value(all[j]) < value(low) {
				low = all[j]
			}
		}
		out[i] = all[i]
		out[i].rssMiB, out[i].rssStoreMiB = low.rssMiB, low.rssStoreMiB
	}
	return out
}

func analyse(s *settings, all []sample) []result {
	var out []result
	for _, sr := range figures(s) {
		f := lastHalf(s, all, sr.value)
		flat, rule := sr.judge(f, all)
		unit := sr.unit
		if unit != "" {
			unit = " " + unit
		}
		line := fmt.Sprintf("soak: %s slope_per_h=%.3g last_half_mean=%.4g min=%.4g max=%.4g range_pct=%.1f q3=%.4g..%.4g q4=%.4g..%.4g n=%d flat=%s (rule: %s)",
			sr.key, f.slope, f.mean, f.min, f.max, f.rangePct, f.earlyMin, f.earlyMax, f.lateMin, f.lateMax, f.n, yesNo(flat), rule)
		out = append(out, result{s: sr, f: f, flat: flat, line: line})
	}
	return out
}

// noiseLine says what the machine did besides the run: the CPU time its
// hypervisor gave to other guests (steal), cairn's own CPU, and how
// closely commit time followed the steal (Pearson's r over the samples
// after the first, whose commit time includes the seeding). Not judged:
// it is there to read commit time's line against.
func noiseLine(all []sample) string {
	if len(all) < 3 || math.IsNaN(all[0].stealPct) {
		return "soak: machine noise not in this soak.csv"
	}
	var steal, cpu, commit []float64
	var stealMax float64
	for _, x := range all[1:] {
		steal = append(steal, x.stealPct)
		cpu = append(cpu, x.cairnCPUPct)
		commit = append(commit, x.commitMS)
		stealMax = max(stealMax, x.stealPct)
	}
	return fmt.Sprintf("soak: machine steal_pct mean=%.2f max=%.2f (of all CPUs' time) cairn_cpu_pct mean=%.2f (of a core); commit_ms against steal_pct r=%.2f n=%d (not judged)",
		mean(steal), stealMax, mean(cpu), pearson(steal, commit), len(steal))
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// pearson is the correlation of x and y, NaN if either is constant.
func pearson(x, y []float64) float64 {
	mx, my := mean(x), mean(y)
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// plot draws one small panel per series: the values over the run, the
// outage shaded, the last half's least-squares line dashed.
func plot(s *settings, all []sample, rep []result) string {
	const (
		w, left, right = 760, 70, 20
		panelH, top    = 110, 48
		gap            = 46
	)
	h := top + len(rep)*(panelH+gap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13">cairn soak: %d sensors at 1 Hz for %s, a sample every %s (x: minutes)</text>`+"\n",
		left, devices, s.duration, s.sample)
	fmt.Fprintf(&b, `<text x="%d" y="32" font-size="12" fill="#444">shaded: the upstream down (%s to %s); dashed: least-squares fit over the last half</text>`+"\n",
		left, s.outageAt, s.outageAt+s.outage)
	totalH := s.duration.Hours()
	pw := float64(w - left - right)
	xOf := func(hours float64) float64 { return left + hours/totalH*pw }
	for i, r := range rep {
		y0 := float64(top + i*(panelH+gap) + 18)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range all {
			for _, v := range []float64{r.s.value(x), secondOr(r.s, x)} {
				if !math.IsNaN(v) {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
		if r.s.limit > 0 {
			hi = max(hi, r.s.limit)
		}
		lo = min(lo, 0)
		if hi <= lo {
			hi = lo + 1
		}
		hi += (hi - lo) * 0.05
		yOf := func(v float64) float64 { return y0 + panelH - (v-lo)/(hi-lo)*panelH }
		unit := r.s.unit
		if unit != "" {
			unit = " (" + unit + ")"
		}
		verdict := "flat"
		if !r.flat {
			verdict = "NOT flat"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s%s</text>`, left, y0-6, esc(r.s.title), esc(unit))
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">last half: %s %s/h, %s</text>`+"\n", w-right, y0-6, num(r.f.slope), esc(r.s.unit), verdict)
		fmt.Fprintf(&b, `<clipPath id="p%d"><rect x="%d" y="%.1f" width="%.1f" height="%d"/></clipPath>`+"\n", i, left, y0, pw, panelH)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#f6e0e0"/>`, xOf(s.outageAt.Hours()), y0, xOf((s.outageAt+s.outage).Hours())-xOf(s.outageAt.Hours()), panelH)
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#888"/>`+"\n", left, y0, pw, panelH)
		for _, v := range []float64{lo, (lo + hi) / 2, hi} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`, left-4, yOf(v)+4, num(v))
		}
		for m := 0.0; m <= totalH*60+1e-9; m += tickStep(totalH * 60) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%.0f</text>`, xOf(m/60), y0+panelH+13, m)
		}
		if r.s.limit > 0 {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="2,3"/>`, left, yOf(r.s.limit), xOf(totalH), yOf(r.s.limit))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#c00">cap</text>`+"\n", w-right-4, yOf(r.s.limit)-3)
		}
		if r.s.second != nil {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="#7a9ab0" stroke-width="2" stroke-dasharray="1,2" points="%s"/>`, points(all, r.s.second, xOf, yOf))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#7a9ab0">··· %s</text>`+"\n", left+44+7*len(r.s.title), y0+panelH-6, esc(r.s.secondTitle))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="%s"/>`+"\n", points(all, r.s.value, xOf, yOf))
		if r.s.second != nil {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#1f5fa8">— %s</text>`+"\n", left+4, y0+panelH-6, esc(r.s.title))
		}
		if r.f.n >= 2 {
			fmt.Fprintf(&b, `<line clip-path="url(#p%d)" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e07000" stroke-width="1.5" stroke-dasharray="5,3"/>`+"\n",
				i, xOf(r.f.start), yOf(r.f.intercept+r.f.slope*r.f.start), xOf(totalH), yOf(r.f.intercept+r.f.slope*totalH))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func secondOr(s series, x sample) float64 {
	if s.second == nil {
		return math.NaN()
	}
	return s.second(x)
}

func points(all []sample, value func(sample) float64, xOf, yOf func(float64) float64) string {
	var p []string
	for _, x := range all {
		p = append(p, fmt.Sprintf("%.1f,%.1f", xOf(x.t/3600), yOf(value(x))))
	}
	return strings.Join(p, " ")
}

// tickStep is the minutes between the x axis' labels: about six of them.
func tickStep(minutes float64) float64 {
	for _, st := range []float64{1, 2, 5, 10, 15, 30, 60, 120} {
		if minutes/st <= 8 {
			return st
		}
	}
	return 240
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case a >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// replot reads the samples of a run back from its soak.csv, for
// SOAK_REPLOT: the plot and the lines are drawn again from them.
func replot(csvFile string) ([]sample, error) {
	b, err := os.ReadFile(csvFile)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	cols := 22
	switch {
	case len(lines) < 2:
		return nil, fmt.Errorf("%s: no samples", csvFile)
	case lines[0] == csvHeaderOld:
		cols = 17 // before the machine's noise was sampled
	case lines[0] != csvHeader:
		return nil, fmt.Errorf("%s: not a soak.csv of this version (header %q)", csvFile, lines[0])
	}
	var out []sample
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		v := make([]float64, len(f))
		for j := range f {
			if v[j], err = strconv.ParseFloat(f[j], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", csvFile, i+2, err)
			}
		}
		if len(v) != cols {
			return nil, fmt.Errorf("%s:%d: %d columns, want %d", csvFile, i+2, len(v), cols)
		}
		x := sample{t: v[0], rssMiB: v[1], hwmMiB: v[2], goroutines: v[3], fds: v[4], dirMiB: v[5], storeMiB: v[6],
			pending: v[7], commitMS: v[8], commits: v[9], stored: v[10], pruned: v[11], removed: v[12], upOK: v[13],
			dashboardFetches: v[14], dashboardFailures: v[15], sentR: v[16],
			stealPct: math.NaN(), cairnCPUPct: math.NaN(), rssAnonMiB: math.NaN(), rssFileMiB: math.NaN(), rssStoreMiB: math.NaN()}
		if cols == 22 {
			x.stealPct, x.cairnCPUPct, x.rssAnonMiB, x.rssFileMiB, x.rssStoreMiB = v[17], v[18], v[19], v[20], v[21]
		}
		out = append(out, x)
	}
	return out, nil
}
