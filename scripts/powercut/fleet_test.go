package powercut

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// t0 is 2023-11-14T22:13:20Z in Unix milliseconds: a sensor's message k has
// the time t0+k ms, unique per sensor.
const t0 = 1_700_000_000_000

// Metrics of the messages: three in a reading's message, a temperature,
// a humidity and a thermostat's mode (a text), and one in an event's, a
// button's action (a text).
const (
	metricTemp   = "temperature"
	metricHumid  = "humidity"
	metricMode   = "mode"
	metricAction = "action"
)

// metricsOf returns the metrics of message k: every fourth message is a
// button's event alone, at its own time.
func metricsOf(k int) []string {
	if k%4 == 3 {
		return []string{metricAction}
	}
	return []string{metricTemp, metricHumid, metricMode}
}

// readingsIn returns how many readings message k gives.
func readingsIn(k int) int { return len(metricsOf(k)) }

// modes and events are the texts of the mode and action series; none
// needs an escape in line protocol or JSON, and none is a state word such
// as "off", which begins a number series.
var (
	modes  = []string{"idle", "heat", "cool", "éco"}
	events = []string{"single", "double", "hold", "long_push", "btn_down"}
)

// textOf is the text of metric in message k. Every third mode is a
// "stage" that changes every 40 messages, so new texts keep coming into
// the series' dictionary (54 at most, below store.max_states_per_series)
// while the power is cut.
func textOf(metric string, k int) string {
	switch {
	case metric == metricAction:
		return events[(k/4)%len(events)]
	case metric != metricMode:
		return ""
	case k%3 == 0:
		return fmt.Sprintf("stage-%d", (k/40)%50)
	}
	return modes[(k/3)%len(modes)]
}

// temperature and humidity are the values message k carries; the checks
// recompute them.
func temperature(k int) float64 { return float64(k%500)/10 - 10 }
func humidity(k int) float64    { return float64((k*7)%1000) / 10 }

func payload(k int) string {
	if k%4 == 3 {
		return fmt.Sprintf(`{"ts":%d,"action":%q}`, t0+int64(k), textOf(metricAction, k))
	}
	return fmt.Sprintf(`{"ts":%d,"temperature":%s,"humidity":%s,"mode":%q}`, t0+int64(k),
		strconv.FormatFloat(temperature(k), 'f', -1, 64), strconv.FormatFloat(humidity(k), 'f', -1, 64), textOf(metricMode, k))
}

// matches reports whether metric of message k has the value v and the
// text text.
func matches(metric string, k int, v float64, text string) bool {
	if !slices.Contains(metricsOf(k), metric) {
		return false
	}
	return v == valueOf(metric, k) && text == textOf(metric, k)
}

// notAcked marks a message sent (perhaps) but not acknowledged.
const notAcked = -1

// sensor is one simulated device with its own MQTT connection. Like a real
// sensor it sends again, after a reconnect, what was not acknowledged; what
// was acknowledged it forgets. It is safe for concurrent use.
type sensor struct {
	name string

	mu sync.Mutex // guards ackedIn and present
	// ackedIn holds, per message, the cycle whose load got its PUBACK, or
	// notAcked.
	ackedIn []int
	// present records, per message, whether a check found all its
	// readings.
	present []bool
}

func newSensors(n int, prefix string) []*sensor {
	out := make([]*sensor, n)
	for i := range out {
		out[i] = &sensor{name: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return out
}

func (s *sensor) topic() string { return "sensors/" + s.name + "/telemetry" }

// next records a new message and returns its number.
func (s *sensor) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackedIn = append(s.ackedIn, notAcked)
	s.present = append(s.present, false)
	return len(s.ackedIn) - 1
}

func (s *sensor) ack(k, cycle int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ackedIn[k] == notAcked {
		s.ackedIn[k] = cycle
	}
}

// unacked returns the messages sent without a PUBACK so far.
func (s *sensor) unacked() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for k, c := range s.ackedIn {
		if c == notAcked {
			out = append(out, k)
		}
	}
	return out
}

// acked returns how many messages were acknowledged in cycle, or in any
// cycle if cycle < 0.
func (s *sensor) acked(cycle int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.ackedIn {
		if c != notAcked && (cycle < 0 || c == cycle) {
			n++
		}
	}
	return n
}

// loadStats are one run of publish.
type loadStats struct {
	sent, resent, acked int
	readings            int // the acknowledged messages' readings
}

// publish connects to addr, sends again what was not acknowledged, then
// new messages until limit messages were sent in all (limit < 0: no limit),
// with at most window unacknowledged. It stops early when stop is closed
// (testkit.ErrStopped) or the connection fails, and returns once every
// message it sent got its PUBACK or an error. PUBACKs are recorded with
// cycle.
func (s *sensor) publish(addr string, cycle, window, limit int, stop <-chan struct{}) (loadStats, error) {
	var st loadStats
	w, err := testkit.ConnectWindow(addr, "powercut-"+s.name, window, startTimeout, ackTimeout)
	if err != nil {
		return st, err
	}
	var mu sync.Mutex // guards st.acked
	send := func(k int) error {
		err := w.Publish(s.topic(), payload(k), stop, func() {
			s.ack(k, cycle)
			mu.Lock()
			st.acked++
			st.readings += readingsIn(k)
			mu.Unlock()
		})
		if err == nil {
			st.sent++
		}
		return err
	}
	err = func() error {
		for _, k := range s.unacked() {
			if err := send(k); err != nil {
				return err
			}
			st.resent++
		}
		for limit < 0 || st.sent < limit {
			if err := send(s.next()); err != nil {
				return err
			}
		}
		return nil
	}()
	w.Close()
	return st, err
}

// fleetLoad is the sensors publishing concurrently until stopped.
type fleetLoad struct {
	stop     chan struct{}
	stopOnce func()
	done     chan struct{} // closed when every sensor's publish returned
	stats    []loadStats   // per sensor; read after done
	errs     []error       // per sensor; read after done
}

// startLoad starts every sensor publishing to addr, each at most limit
// messages (limit < 0: no limit), until halt is called.
func startLoad(sensors []*sensor, addr string, cycle, window, limit int) *fleetLoad {
	l := &fleetLoad{stop: make(chan struct{}), done: make(chan struct{}),
		stats: make([]loadStats, len(sensors)), errs: make([]error, len(sensors))}
	l.stopOnce = sync.OnceFunc(func() { close(l.stop) })
	var wg sync.WaitGroup
	for i, s := range sensors {
		wg.Go(func() { l.stats[i], l.errs[i] = s.publish(addr, cycle, window, limit, l.stop) })
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

// halt tells the sensors to stop and waits until they have, up to timeout.
// It returns the totals.
func (l *fleetLoad) halt(timeout time.Duration) (loadStats, error) {
	l.stopOnce()
	select {
	case <-l.done:
	case <-time.After(timeout):
		return loadStats{}, fmt.Errorf("publishers still waiting for PUBACKs %s after being stopped", timeout)
	}
	var sum loadStats
	for _, st := range l.stats {
		sum.sent += st.sent
		sum.resent += st.resent
		sum.acked += st.acked
		sum.readings += st.readings
	}
	return sum, nil
}

// ended reports whether every sensor's publish returned.
func (l *fleetLoad) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// lostReading is an acknowledged reading a check did not find.
type lostReading struct {
	sensor, metric string
	k              int
	ackedIn        int  // the cycle's index, from 0
	seenBefore     bool // an earlier check found it
}

func (r lostReading) String() string {
	seen := "never found by an earlier check"
	if r.seenBefore {
		seen = "found by an earlier check"
	}
	return fmt.Sprintf("%s %s ts=%d (message %d), acknowledged in cycle %d, %s",
		r.sensor, r.metric, t0+int64(r.k), r.k, r.ackedIn+1, seen)
}

// storeCheck is what a check of the store found.
type storeCheck struct {
	stored   int           // readings listed
	counted  uint64        // readings the store's counter holds
	missing  []lostReading // acknowledged readings not found, oldest acknowledgement first
	doubled  []string      // readings listed more than once
	torn     []string      // acknowledged messages with only some of their readings stored
	unknown  []string      // readings listed that were never sent, or with another value
	openWarn []string      // warnings the store logged while this check opened it
	// cursors is where each upstream's cursor stands in the log.
	cursors map[string]buffer.OutboxState
}

// lostIn returns how many of the missing readings were acknowledged in
// cycle.
func (ch storeCheck) lostIn(cycle int) int {
	n := 0
	for _, r := range ch.missing {
		if r.ackedIn == cycle {
			n++
		}
	}
	return n
}

// checkStore opens the store in dir (cairn must have stopped) and compares
// it with what the sensors sent: every acknowledged reading is there exactly
// once, and nothing else is.
func checkStore(dir string, sensors []*sensor) (storeCheck, error) {
	var ch storeCheck
	logw := testkit.NewLines()
	store, err := buffer.Open(buffer.Options{Dir: dir, Logger: newTextLogger(logw)})
	if err != nil {
		return ch, fmt.Errorf("open store: %w", err)
	}
	ch.openWarn = logw.Matching("level=WARN")
	err = func() error {
		known := make(map[string]*sensor, len(sensors))
		for _, s := range sensors {
			known[s.name] = s
		}
		for _, sr := range store.SeriesList() {
			if known[sr.Device] == nil {
				ch.unknown = append(ch.unknown, fmt.Sprintf("series %s/%s", sr.Device, sr.Metric))
			}
		}
		for _, s := range sensors {
			rs, err := allReadings(store, s.name)
			if err != nil {
				return err
			}
			ch.stored += len(rs)
			s.compare(rs, &ch)
		}
		slices.SortStableFunc(ch.missing, func(a, b lostReading) int { return a.ackedIn - b.ackedIn })
		ch.counted = store.ReadingCount()
		ch.cursors = make(map[string]buffer.OutboxState)
		for _, name := range store.CursorNames() {
			ch.cursors[name], _ = store.CursorState(name)
		}
		return nil
	}()
	return ch, errors.Join(err, store.Close())
}

// allReadings returns every reading of device, paging through the store
// MaxQueryLimit readings at a time.
func allReadings(store *buffer.Store, device string) ([]buffer.Reading, error) {
	var out []buffer.Reading
	from := int64(math.MinInt64)
	for {
		page, err := store.Readings(buffer.Query{Device: device, From: from, To: math.MaxInt64, Limit: buffer.MaxQueryLimit})
		if err != nil {
			return nil, err
		}
		if len(page) < buffer.MaxQueryLimit {
			return append(out, page...), nil
		}
		// The page may end inside a timestamp's readings: keep the whole
		// timestamp for the next page.
		last := page[len(page)-1].TS
		cut := len(page)
		for cut > 0 && page[cut-1].TS == last {
			cut--
		}
		if cut == 0 {
			return nil, fmt.Errorf("device %s has %d readings or more at one time", device, len(page))
		}
		out = append(out, page[:cut]...)
		from = last
	}
}

// compare checks the readings the store holds for s against what s sent.
func (s *sensor) compare(rs []buffer.Reading, ch *storeCheck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.ackedIn)
	counts := map[string][]int{metricTemp: make([]int, n), metricHumid: make([]int, n),
		metricMode: make([]int, n), metricAction: make([]int, n)}
	for _, r := range rs {
		k := int(r.TS/1e6 - t0)
		c := counts[r.Metric]
		if r.TS%1e6 != 0 || k < 0 || k >= n || c == nil || !matches(r.Metric, k, r.Value, r.Text) {
			ch.unknown = append(ch.unknown, fmt.Sprintf("%s %s ts=%d value=%v text=%q", r.Device, r.Metric, r.TS, r.Value, r.Text))
			continue
		}
		c[k]++
	}
	for k := range n {
		found := 0
		for _, metric := range metricsOf(k) {
			switch c := counts[metric][k]; {
			case c > 1:
				ch.doubled = append(ch.doubled, fmt.Sprintf("%s %s ts=%d (message %d) stored %d times", s.name, metric, t0+int64(k), k, c))
				found++
			case c == 1:
				found++
			case s.ackedIn[k] != notAcked:
				ch.missing = append(ch.missing, lostReading{sensor: s.name, metric: metric, k: k, ackedIn: s.ackedIn[k], seenBefore: s.present[k]})
			}
		}
		// A commit split into parts may store part of a message it did
		// not acknowledge; the sender sends it again.
		if found > 0 && found < readingsIn(k) && s.ackedIn[k] != notAcked {
			ch.torn = append(ch.torn, fmt.Sprintf("%s ts=%d (message %d)", s.name, t0+int64(k), k))
		}
		s.present[k] = found == readingsIn(k)
	}
}

// valueOf is the value of metric in message k (0 for a text).
func valueOf(metric string, k int) float64 {
	switch metric {
	case metricTemp:
		return temperature(k)
	case metricHumid:
		return humidity(k)
	}
	return 0
}

// newTextLogger logs in slog's text format to w.
func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
