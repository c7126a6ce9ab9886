package buffer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitFor is how long a test waits for a result that a Writer which
// does not wait gives at once; with a Wait of an hour, a Writer that
// waits never gives it in time.
const waitFor = 30 * time.Second

// submitFrom submits rs from publisher from and returns the channel its
// result comes on.
func submitFrom(t *testing.T, w *Writer, from string, rs ...Reading) <-chan Result {
	t.Helper()
	ch := make(chan Result, 1)
	if err := w.SubmitFrom(context.Background(), from, rs, func(r Result) { ch <- r }); err != nil {
		t.Fatalf("submit: %v", err)
	}
	return ch
}

// submitStored submits r from publisher from without waiting for its
// result, which must be r stored; wg is done when it comes.
func submitStored(t *testing.T, w *Writer, wg *sync.WaitGroup, from string, r Reading) {
	t.Helper()
	wg.Add(1)
	if err := w.SubmitFrom(context.Background(), from, []Reading{r}, func(res Result) {
		defer wg.Done()
		if res.Err != nil || res.Stored != 1 {
			t.Errorf("%s: %+v", r.Device, res)
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// result waits for the result on ch.
func result(t *testing.T, ch <-chan Result, what string) Result {
	t.Helper()
	select {
	case res := <-ch:
		if res.Err != nil {
			t.Fatalf("%s: %v", what, res.Err)
		}
		return res
	case <-time.After(waitFor):
		t.Fatalf("%s: no result in %s: the commit waited", what, waitFor)
		return Result{}
	}
}

// TestWriter_LonePublisherDoesNotWait: a publisher that waits for each
// result before it sends again is never waited for, with a Wait of an
// hour: each of its messages is a commit of its own, at once, for one
// device and for several in turn.
func TestWriter_LonePublisherDoesNotWait(t *testing.T) {
	_, w := testStoreWith(t, "", WriterOptions{Wait: time.Hour})
	before := w.Stats()
	const n = 40
	for i := range n {
		r := Reading{Device: "lone", Metric: "m", TS: int64(i+1) * 1e9, Value: float64(i)}
		if res := result(t, submitFrom(t, w, "lone", r), fmt.Sprintf("message %d", i)); res.Stored != 1 {
			t.Fatalf("message %d: got %+v, want 1 stored", i, res)
		}
	}
	after := w.Stats()
	if got := after.Commits - before.Commits; got != n {
		t.Errorf("commits: got %d, want %d", got, n)
	}
	if got := after.Gathered - before.Gathered; got != 0 {
		t.Errorf("commits that waited: got %d, want 0", got)
	}
}

// TestWriter_ClockedPublisherOfManyDevices: a publisher that sends for
// five devices in turn, each message after the result of the one before,
// is waited for once (its other devices have sent); it sent nothing while
// that commit waited, so it is not waited for again.
func TestWriter_ClockedPublisherOfManyDevices(t *testing.T) {
	_, w := testStoreWith(t, "", WriterOptions{Wait: 100 * time.Millisecond})
	before := w.Stats()
	const n = 40
	for i := range n {
		r := Reading{Device: fmt.Sprintf("bridged-%d", i%5), Metric: "m", TS: int64(i+1) * 1e9, Value: float64(i)}
		result(t, submitFrom(t, w, "bridge", r), fmt.Sprintf("message %d", i))
	}
	after := w.Stats()
	if got := after.Commits - before.Commits; got != n {
		t.Errorf("commits: got %d, want %d", got, n)
	}
	if got := after.Gathered - before.Gathered; got != 1 {
		t.Errorf("commits that waited: got %d, want 1 (the first after another device had sent)", got)
	}
}

// TestWriter_WaitGathersOtherSensors: with a Wait of an hour, a message
// from one publisher waits for another publisher that has sent recently,
// and is committed together with that one's next message. Once the other
// is gone (Forget), nothing waits for it.
func TestWriter_WaitGathersOtherSensors(t *testing.T) {
	_, w := testStoreWith(t, "", WriterOptions{Wait: time.Hour})
	rd := func(dev string, ts int64) Reading { return Reading{Device: dev, Metric: "m", TS: ts * 1e9, Value: 1} }

	// b alone: nobody else has sent, so it does not wait.
	result(t, submitFrom(t, w, "b", rd("b", 1)), "b's first message")

	before := w.Stats()
	waits := w.waits.Load()
	a := submitFrom(t, w, "a", rd("a", 1))
	// a waits for b, which has sent within Wait and is not in a's commit.
	for deadline := time.Now().Add(waitFor); w.waits.Load() == waits; {
		if time.Now().After(deadline) {
			t.Fatal("a's commit did not wait for b")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case res := <-a:
		t.Fatalf("a's message was committed without waiting for b: %+v", res)
	default:
	}
	b := submitFrom(t, w, "b", rd("b", 2))
	result(t, a, "a's message")
	result(t, b, "b's second message")
	after := w.Stats()
	if got := after.Commits - before.Commits; got != 1 {
		t.Errorf("commits of a's message and b's second: got %d, want 1", got)
	}
	if got := after.Gathered - before.Gathered; got != 1 {
		t.Errorf("commits that waited: got %d, want 1", got)
	}

	// b is gone: a's next message does not wait for it.
	w.Forget("b")
	before = w.Stats()
	result(t, submitFrom(t, w, "a", rd("a", 2)), "a's message after b is gone")
	if got := w.Stats().Commits - before.Commits; got != 1 {
		t.Errorf("commits after b is gone: got %d, want 1", got)
	}
}

// TestWriter_ForgetWakesAWaitingCommit: a commit that sleeps waiting for
// a publisher's sensor ends when that publisher goes (Forget), not at the
// end of its slice: a one-shot client (connect, publish, disconnect) that
// publishes again at once, as a script of mosquitto_pub calls does, waited
// a slice for the one before it.
func TestWriter_ForgetWakesAWaitingCommit(t *testing.T) {
	_, w := testStoreOpts(t, Options{NoSync: true}, WriterOptions{Wait: time.Hour})
	rd := func(dev string, ts int64) Reading { return Reading{Device: dev, Metric: "m", TS: ts * 1e9, Value: 1} }
	var took []time.Duration
	for try := range 3 { // a pause of the machine's is not the slice: try again
		b, a := fmt.Sprintf("b%d", try), fmt.Sprintf("a%d", try)
		result(t, submitFrom(t, w, b, rd("s", int64(2*try+1))), "b's message")
		waits := w.waits.Load()
		ch := submitFrom(t, w, a, rd("s", int64(2*try+2)))
		var before time.Time // the last poll that found a's commit awake
		for deadline := time.Now().Add(waitFor); ; time.Sleep(100 * time.Microsecond) {
			now := time.Now()
			if w.waits.Load() != waits {
				break
			}
			if now.After(deadline) {
				t.Fatal("a's commit did not wait for b")
			}
			before = now
		}
		start := time.Now()
		w.Forget(b)
		result(t, ch, "a's message")
		took = append(took, time.Since(start))
		w.Forget(a)
		// Only a Forget in the slice's first half counts: without the
		// wake, the commit then ends half a slice later at least.
		if start.Sub(before) < gatherSlice/2 && took[try] < gatherSlice/4 {
			return
		}
	}
	t.Fatalf("a's commit ended %v after b went; want it at once, not at the end of a %v slice", took, gatherSlice)
}

// TestWriter_GoneClientsDoNotCutTheFloor: clients that disconnect while a
// busy stream's commit gathers for its floor (Forget, for clients the
// commit does not wait for) do not end that commit: it waits for no
// sensor then, and only a slice to which nothing came ends it.
func TestWriter_GoneClientsDoNotCutTheFloor(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{Wait: time.Hour})
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() { // a client goes every 3 ms
		defer churn.Done()
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				w.Forget(fmt.Sprintf("gone-%d", i))
			}
		}
	}()
	// Each of 5 devices every 20 ms, for 0.6 s: a commit of gatherFloor
	// is one in 50 ms; ended by each client that went, one in 20 ms.
	busyStreamGathersForTheFloor(t, s, w, 150, 4*time.Millisecond)
	close(stop)
	churn.Wait()
}

// TestWriter_WaitGathersALightStream: sensors that send on their own
// clock, not waiting for results, are gathered into few commits, whether
// each is a publisher of its own or one publisher sends for all of them;
// every reading is stored.
func TestWriter_WaitGathersALightStream(t *testing.T) {
	const wait = 100 * time.Millisecond
	for _, oneClient := range []bool{false, true} {
		t.Run(fmt.Sprintf("one client %v", oneClient), func(t *testing.T) {
			s, w := testStoreWith(t, "", WriterOptions{Wait: wait})
			before := w.Stats()
			var wg sync.WaitGroup
			const devices, rounds = 20, 15
			tick := time.NewTicker(2 * time.Millisecond) // each device every 40 ms
			defer tick.Stop()
			for i := range devices * rounds {
				<-tick.C
				dev := fmt.Sprintf("s-%d", i%devices)
				from := dev
				if oneClient {
					from = "sim"
				}
				submitStored(t, w, &wg, from, Reading{Device: dev, Metric: "m", TS: int64(i+1) * 1e9, Value: float64(i)})
			}
			wg.Wait()
			after := w.Stats()
			commits := after.Commits - before.Commits
			if n := uint64(devices * rounds); commits*5 > n {
				t.Errorf("%d messages in %d commits; want at most one commit for five messages", n, commits)
			}
			if after.Gathered == before.Gathered {
				t.Error("no commit waited for the others")
			}
			if got := s.ReadingCount(); got != devices*rounds {
				t.Errorf("readings stored: got %d, want %d", got, devices*rounds)
			}
			t.Logf("%d messages in %d commits, %d of which waited", devices*rounds, commits, after.Gathered-before.Gathered)
		})
	}
}

// TestWriter_WaitEndsWhenASensorIsOverdue: a sensor that sent a burst,
// messages a few milliseconds apart, and then stopped is waited for only
// until it is overdue (twice its longest gap), not for Wait (an hour
// here): the end of a backlog drained from a broker does not wait.
func TestWriter_WaitEndsWhenASensorIsOverdue(t *testing.T) {
	_, w := testStoreWith(t, "", WriterOptions{Wait: time.Hour})
	var last <-chan Result
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i := range 10 {
		<-tick.C
		last = submitFrom(t, w, "burst", Reading{Device: "b", Metric: "m", TS: int64(i+1) * 1e9, Value: 1})
	}
	result(t, last, "the burst's last message")
	before := w.Stats()
	result(t, submitFrom(t, w, "a", Reading{Device: "a", Metric: "m", TS: 1e9, Value: 1}), "a's message after the burst")
	if got := w.Stats().Commits - before.Commits; got != 1 {
		t.Errorf("commits of a's message: got %d, want 1", got)
	}
}

// TestWriter_BusyStreamGathersForTheFloor: sensors that send every few
// milliseconds have all joined a commit within a slice; while readings
// keep coming, a commit that waited for them still gathers for
// gatherFloor, not one commit each time they have all sent.
func TestWriter_BusyStreamGathersForTheFloor(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{Wait: time.Hour})
	// Each of 5 devices every 10 ms, for half a second: a commit each
	// time every device had sent would be one every 10 to 20 ms; a commit
	// of gatherFloor, one in 50 ms.
	busyStreamGathersForTheFloor(t, s, w, 250, 2*time.Millisecond)
}

// busyStreamGathersForTheFloor sends messages one reading each from five
// devices in turn, one every every, and checks that they are all stored
// in at most a commit per 40 ms (and two).
func busyStreamGathersForTheFloor(t *testing.T, s *Store, w *Writer, messages int, every time.Duration) {
	t.Helper()
	const devices = 5
	before := w.Stats()
	var wg sync.WaitGroup
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	for i := range messages {
		<-tick.C
		dev := fmt.Sprintf("busy-%d", i%devices)
		submitStored(t, w, &wg, dev, Reading{Device: dev, Metric: "m", TS: int64(i+1) * 1e9, Value: float64(i)})
	}
	elapsed := time.Since(start)
	wg.Wait()
	commits := w.Stats().Commits - before.Commits
	if most := uint64(elapsed/(40*time.Millisecond)) + 2; commits > most {
		t.Errorf("%d messages in %s in %d commits; want at most %d (one in 40 ms)", messages, elapsed.Round(time.Millisecond), commits, most)
	}
	if got := s.ReadingCount(); got != uint64(messages) {
		t.Errorf("readings stored: got %d, want %d", got, messages)
	}
	t.Logf("%d messages in %s in %d commits", messages, elapsed.Round(time.Millisecond), commits)
}

// TestWriter_FloorHoldsNoCommitToWhichNothingCame: a commit that waited
// for a sensor which then sent nothing (its broker holds its messages,
// say) ends once that sensor is overdue, in one slice: gatherFloor holds
// only a commit to which readings came in the slice before (without
// that condition, the commit sleeps on to its floor).
func TestWriter_FloorHoldsNoCommitToWhichNothingCame(t *testing.T) {
	_, w := testStoreOpts(t, Options{NoSync: true}, WriterOptions{Wait: time.Hour})
	rd := func(dev string, ts int64) Reading { return Reading{Device: dev, Metric: "m", TS: ts * 1e9, Value: 1} }
	// a's commit waits for b only if a comes before b is overdue: a test
	// held up that long tries again, with new sensors.
	for try := range 5 {
		b, a := fmt.Sprintf("b%d", try), fmt.Sprintf("a%d", try)
		for i := range 4 { // b sends every 5 ms: overdue 10 ms after its last
			result(t, submitFrom(t, w, b, rd(b, int64(i+1))), "b's message")
			time.Sleep(5 * time.Millisecond)
		}
		before, waits := w.Stats(), w.waits.Load()
		result(t, submitFrom(t, w, a, rd(a, 1)), "a's message")
		if w.Stats().Gathered == before.Gathered {
			w.Forget(a) // or the next try's commits wait for them
			w.Forget(b)
			continue
		}
		if got := w.waits.Load() - waits; got != 1 {
			t.Errorf("a's commit slept %d times; want 1, until b was overdue", got)
		}
		return
	}
	t.Fatal("a's commit never waited for b")
}
