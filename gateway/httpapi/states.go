package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

// statesJSON is a group of the stats of a text series: its readings, the
// time in each state, and the time before the series' first reading.
// Times are given twice: in seconds (a float, for people and charts) and
// in nanoseconds (an integer, exact).
type statesJSON struct {
	Start          string      `json:"start"`
	Count          uint64      `json:"count"`
	States         []stateJSON `json:"states"`
	UnknownSeconds seconds     `json:"unknown_seconds"`
	UnknownNanos   uint64      `json:"unknown_nanoseconds"`
}

type stateJSON struct {
	State   string  `json:"state"`
	Count   uint64  `json:"count"`
	Seconds seconds `json:"seconds"`
	Nanos   uint64  `json:"nanoseconds"`
}

// seconds is a time in nanoseconds, written as seconds in decimal,
// exactly ("1.541334138", not the nearest float64's "1.5413341379999999").
type seconds uint64

func (s seconds) String() string {
	whole := strconv.FormatUint(uint64(s)/1e9, 10)
	frac := uint64(s) % 1e9
	if frac == 0 {
		return whole
	}
	digits := strconv.FormatUint(frac+1e9, 10)[1:] // nine digits, zero-padded
	return whole + "." + strings.TrimRight(digits, "0")
}

func (s seconds) MarshalJSON() ([]byte, error) { return []byte(s.String()), nil }

// states answers stats for a text series: per group (or the whole range
// when group is "all") its readings and the time in each state at now.
func (a *API) states(w http.ResponseWriter, device, metric, group string, level aggregate.Level, from, to, now int64, asCSV bool) {
	var groups []buffer.StatesAt
	if group == "all" {
		g, _, err := a.opts.Store.StatesCover(device, metric, from, to, now)
		if err != nil {
			a.fail(w, http.StatusInternalServerError, err)
			return
		}
		groups = append(groups, g)
	} else {
		var err error
		if groups, _, err = a.opts.Store.StatesByLevel(device, metric, level, from, to, now); err != nil {
			a.fail(w, http.StatusInternalServerError, err)
			return
		}
	}
	if asCSV {
		writeStatesCSV(w, device, metric, groups)
		return
	}
	out := struct {
		Device string       `json:"device"`
		Metric string       `json:"metric"`
		Group  string       `json:"group"`
		Stats  []statesJSON `json:"stats"`
	}{Device: device, Metric: metric, Group: group, Stats: make([]statesJSON, len(groups))}
	for i, g := range groups {
		s := statesJSON{
			Start: time.Unix(0, g.Start).UTC().Format(time.RFC3339Nano), Count: g.Count,
			States:         make([]stateJSON, len(g.States)),
			UnknownSeconds: seconds(g.Unknown), UnknownNanos: g.Unknown,
		}
		for j, st := range g.States {
			s.States[j] = stateJSON{State: st.Text, Count: st.Count, Seconds: seconds(st.Dur), Nanos: st.Dur}
		}
		out.Stats[i] = s
	}
	writeJSON(w, http.StatusOK, out)
}

// writeStatesCSV answers the stats of a text series as CSV: a row per
// group and state (one with no state for a group with none), each with
// its group's count and unknown time.
func writeStatesCSV(w http.ResponseWriter, device, metric string, groups []buffer.StatesAt) {
	cw := startCSV(w, []string{device, metric}, "start", "count", "state", "state_count", "seconds", "unknown_seconds")
	row := func(g buffer.StatesAt, state string, count, dur uint64) {
		cw.plain(time.Unix(0, g.Start).UTC().Format(time.RFC3339Nano))
		cw.plain(strconv.FormatUint(g.Count, 10))
		cw.text(state)
		cw.plain(strconv.FormatUint(count, 10))
		cw.plain(seconds(dur).String())
		cw.plain(seconds(g.Unknown).String())
		cw.endRow()
	}
	for _, g := range groups {
		if len(g.States) == 0 {
			row(g, "", 0, 0)
		}
		for _, st := range g.States {
			row(g, st.Text, st.Count, st.Dur)
		}
	}
	cw.flush()
}
