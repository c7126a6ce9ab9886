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
)

// lineUpstream is an upstream that takes every batch of line protocol at
// once and records each reading it took. Close it.
type lineUpstream struct {
	*httptest.Server

	mu    sync.Mutex // guards the fields below
	taken map[takenReading]float64
	n     int      // batches taken
	bad   []string // what could not be read, and why
}

// takenReading names a reading an upstream took.
type takenReading struct {
	device, metric string
	ts             int64 // ns
}

func newLineUpstream() *lineUpstream {
	u := &lineUpstream{taken: make(map[takenReading]float64)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

// serve takes a batch, gzipped or not. A batch it cannot read is
// answered 204 all the same, and recorded: the check reports it.
func (u *lineUpstream) serve(w http.ResponseWriter, r *http.Request) {
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
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return err
		}
		u.taken[takenReading{device, metric, ts}] = v
	}
	return nil
}

func (u *lineUpstream) batches() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n
}

// upstreamCheck is what a check of the live upstream found.
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
		if s == nil || r.ts%1e6 != 0 || v != valueOf(r.metric, k) || !s.stored(k) {
			c.notStored = append(c.notStored, fmt.Sprintf("%s %s ts=%d value=%v", r.device, r.metric, r.ts, v))
		}
	}
	return c
}

// stored reports whether the last check of the store found both readings
// of message k.
func (s *sensor) stored(k int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return k >= 0 && k < len(s.present) && s.present[k]
}

// problems describes what is wrong with the upstreams after the check of
// the store found ch: the live one took a reading the store lost (it was
// sent before it was durable), or its cursor passed readings it never
// took; the one that is down has not every stored reading pending.
func (c upstreamCheck) problems(ch storeCheck) string {
	var b strings.Builder
	list := func(what string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "%d %s:\n", len(items), what)
		for i, it := range items {
			if i == 20 {
				fmt.Fprintf(&b, "\t… and %d more\n", len(items)-i)
				break
			}
			fmt.Fprintf(&b, "\t%s\n", it)
		}
	}
	list("readings the live upstream took that the store does not hold", c.notStored)
	list("lines the live upstream could not read", c.bad)
	live, ok := ch.cursors["live"]
	if !ok {
		fmt.Fprintf(&b, "the store has no cursor of the live upstream (cursors: %v)\n", ch.cursors)
	} else if live.Cursor > uint64(c.distinct) {
		fmt.Fprintf(&b, "the live upstream's cursor passed %d readings, but it took %d\n", live.Cursor, c.distinct)
	}
	down, ok := ch.cursors["down"]
	if !ok {
		fmt.Fprintf(&b, "the store has no cursor of the upstream that is down (cursors: %v)\n", ch.cursors)
	} else if down.Pending() != ch.counted {
		fmt.Fprintf(&b, "the upstream that is down has %d readings pending (cursor %d, log end %d), want every one of the %d stored\n",
			down.Pending(), down.Cursor, down.End, ch.counted)
	}
	return b.String()
}
