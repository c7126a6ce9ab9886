package powercut

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// lineUpstream is an upstream that takes every batch of line protocol at
// once and records each reading it took, or, while down, answers 503 to
// every one. Close it.
type lineUpstream struct {
	*httptest.Server
	down atomic.Bool

	mu    sync.Mutex              // guards the fields below
	taken map[takenReading]string // the field's value as the line has it
	n     int                     // batches taken
	bad   []string                // what could not be read, and why
}

// takenReading names a reading an upstream took.
type takenReading struct {
	device, metric string
	ts             int64 // ns
}

func newLineUpstream() *lineUpstream {
	u := &lineUpstream{taken: make(map[takenReading]string)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

// serve takes a batch, gzipped or not. A batch it cannot read is
// answered 204 all the same, and recorded: the check reports it.
func (u *lineUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if u.down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var in io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in = z
	}
	body, err := io.ReadAll(in)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.n++
	for l := range strings.Lines(string(body)) {
		if err := u.takeLine(strings.TrimSuffix(l, "\n")); err != nil {
			u.bad = append(u.bad, fmt.Sprintf("%q: %v", l, err))
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// takeLine records the readings of a line such as
// "readings,device=d,gateway=g temperature=1.5,humidity=40 1700000000000000000":
// the sensors' names and metrics need no escapes.
func (u *lineUpstream) takeLine(l string) error {
	parts := strings.Split(l, " ")
	if len(parts) != 3 {
		return fmt.Errorf("%d parts, want 3", len(parts))
	}
	ts, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return err
	}
	var device string
	for tag := range strings.SplitSeq(parts[0], ",") {
		if d, ok := strings.CutPrefix(tag, "device="); ok {
			device = d
		}
	}
	if device == "" {
		return fmt.Errorf("no device tag")
	}
	for f := range strings.SplitSeq(parts[1], ",") {
		metric, value, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("field %q", f)
		}
		if !strings.HasPrefix(value, `"`) { // a string field is a text
			if _, err := strconv.ParseFloat(value, 64); err != nil {
				return err
			}
		}
		u.taken[takenReading{device, metric, ts}] = value
	}
	return nil
}

func (u *lineUpstream) batches() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n
}

// upstreamCheck is what a check of an upstream found.
type upstreamCheck struct {
	batches, distinct int
	notStored         []string // readings taken that the store does not hold
	bad               []string
}

// check compares what the upstream took with the store, as the check of the
// store left the sensors: every reading taken is stored.
func (u *lineUpstream) check(sensors []*sensor) upstreamCheck {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := upstreamCheck{batches: u.n, distinct: len(u.taken), bad: u.bad}
	byName := make(map[string]*sensor, len(sensors))
	for _, s := range sensors {
		byName[s.name] = s
	}
	for r, v := range u.taken {
		s := byName[r.device]
		k := int(r.ts/1e6 - t0)
		if s == nil || r.ts%1e6 != 0 || !takenAs(r.metric, v, k) || !s.stored(k) {
			c.notStored = append(c.notStored, fmt.Sprintf("%s %s ts=%d value=%s", r.device, r.metric, r.ts, v))
		}
	}
	return c
}

// takenAs reports whether value, a field of a line, is that of metric in
// message k: the mode's text as a string field, a number for the others.
func takenAs(metric, value string, k int) bool {
	if metric == metricMode {
		return value == strconv.Quote(mode(k))
	}
	v, err := strconv.ParseFloat(value, 64)
	return err == nil && v == valueOf(metric, k)
}

// stored reports whether the last check of the store found every reading
// of message k.
func (s *sensor) stored(k int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return k >= 0 && k < len(s.present) && s.present[k]
}

// problems describes what is wrong with the upstream name after the check
// of the store found ch: it took a reading the store lost (it was sent
// before it was durable), or its cursor passed readings it never took;
// or, if it is down, not every stored reading is pending for it.
func (c upstreamCheck) problems(ch storeCheck, name string, down bool) string {
	var b strings.Builder
	list := func(what string, items []string) { writeList(&b, what, items) }
	list("readings the upstream "+name+" took that the store does not hold", c.notStored)
	list("lines the upstream "+name+" could not read", c.bad)
	cur, ok := ch.cursors[name]
	switch {
	case !ok:
		fmt.Fprintf(&b, "the store has no cursor of the upstream %s (cursors: %v)\n", name, ch.cursors)
	case cur.Cursor > uint64(c.distinct):
		fmt.Fprintf(&b, "the cursor of the upstream %s passed %d readings, but it took %d\n", name, cur.Cursor, c.distinct)
	case down && cur.Pending() != ch.counted:
		fmt.Fprintf(&b, "the upstream %s, down, has %d readings pending (cursor %d, log end %d), want every one of the %d stored\n",
			name, cur.Pending(), cur.Cursor, cur.End, ch.counted)
	}
	return b.String()
}
