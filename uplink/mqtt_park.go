package uplink

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer/syncfile"
)

// A message that an MQTT 5 broker refuses for itself (a Refusal) is set
// aside in ParkDir as <batch>-<n>.mqtt, its topic on the first line and
// its payload after it, with <batch>-<n>.response saying why, so that the
// batch's other messages go and the cursor moves on. Its topic then waits
// a backoff (RetryWaitMin doubled at each refusal, up to RetryWaitMax):
// the batches meanwhile set that topic's messages aside unsent, and
// retryParked, before each batch and when the wait is over, publishes the
// topic's messages set aside, oldest first, until one is refused again.
// One taken is deleted. A person can also send one by hand:
//
//	tail -n +2 F.mqtt | mosquitto_pub -t "$(head -n 1 F.mqtt)" -s …

// parkedMsg is a message set aside: its file and topic.
type parkedMsg struct {
	file, topic string
}

// topicWait is when a refused topic is tried again, and how often it was
// refused since it was last taken.
type topicWait struct {
	next    time.Time
	refused int
}

// loadParked reads the messages set aside by earlier runs, once.
func (u *Uplink) loadParked() error {
	l := &u.mq
	if l.loaded || u.opts.ParkDir == "" {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(u.opts.ParkDir, "*.mqtt"))
	if err != nil {
		return err
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		topic, err := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: no topic line: %w", name, err)
		}
		l.parked = append(l.parked, parkedMsg{file: name, topic: strings.TrimSuffix(topic, "\n")})
	}
	l.loaded = true
	return nil
}

// holding reports whether topic waits after a refusal.
func (l *mqttLink) holding(topic string) bool {
	w, ok := l.waits[topic]
	return ok && time.Now().Before(w.next)
}

// retryTimer returns a timer, and its channel, that fires when
// retryParked has a message to try; both nil when none is set aside.
func (u *Uplink) retryTimer() (*time.Timer, <-chan time.Time) {
	l := &u.mq
	if !IsMQTTURL(u.opts.URL) || u.loadParked() != nil || len(l.parked) == 0 {
		return nil, nil
	}
	var next time.Time
	for i, p := range l.parked {
		if t := l.waits[p.topic].next; i == 0 || t.Before(next) {
			next = t
		}
	}
	if next.Before(l.notBefore) {
		next = l.notBefore
	}
	t := time.NewTimer(time.Until(next))
	return t, t.C
}

// retryIdle runs retryParked while no batch is due; a failure (the
// broker is down) waits RetryWaitMax before the next.
func (u *Uplink) retryIdle(ctx context.Context) {
	if err := u.retryParked(ctx); err != nil && ctx.Err() == nil {
		u.mq.notBefore = time.Now().Add(expBackoff(u.opts.RetryWaitMax, u.opts.RetryWaitMax, 0))
		u.log.Warn("could not try the messages set aside again", "err", err)
	}
}

// parkRefused sets the message m (the i-th of the batch id) aside, which
// the broker refused with r (nil: its topic waits after a refusal, and it
// was not sent), and counts and logs a refusal. Without a ParkDir it
// returns r, or, with r nil, an error: the batch is tried again, whole.
func (u *Uplink) parkRefused(id string, i int, m mqttMessage, r *Refusal) error {
	if u.opts.ParkDir == "" {
		if r == nil {
			return errors.New("no park directory to set a message aside in")
		}
		return r
	}
	if err := u.loadParked(); err != nil {
		return err
	}
	now := time.Now()
	name := filepath.Join(u.opts.ParkDir, fmt.Sprintf("%s-%d", safeName(id), i))
	why := "not sent: the topic waits after a refusal"
	if r != nil {
		why = r.Error()
	}
	if err := writeParked(u.opts.ParkDir, name, m.topic, m.payload, why, now); err != nil {
		return fmt.Errorf("set aside the message to %s: %w", m.topic, err)
	}
	if l := &u.mq; !containsFile(l.parked, name+".mqtt") {
		l.parked = append(l.parked, parkedMsg{file: name + ".mqtt", topic: m.topic})
	}
	u.mu.Lock()
	u.st.ParkedReadings += uint64(m.readings)
	u.mu.Unlock()
	u.countParked()
	if r == nil {
		return nil
	}
	wait := u.refusedTopic(m.topic, r, now)
	u.log.Error("the broker refused a message; set it aside to try again, and going on with the others",
		"batch", id, "topic", m.topic, "reason", r.Error(), "readings", m.readings, "file", name+".mqtt", "in", wait.Round(time.Millisecond))
	return nil
}

// refusedTopic counts a refusal r of a message to topic, has the topic
// wait, and returns how long.
func (u *Uplink) refusedTopic(topic string, r *Refusal, now time.Time) time.Duration {
	l := &u.mq
	if l.waits == nil {
		l.waits = make(map[string]topicWait)
	}
	w := l.waits[topic]
	wait := expBackoff(u.opts.RetryWaitMin, u.opts.RetryWaitMax, w.refused)
	w.refused++
	w.next = now.Add(wait)
	l.waits[topic] = w
	u.mu.Lock()
	u.st.Refused++
	u.st.LastError, u.st.LastErrorAt = "publish to "+topic+": "+r.Error(), &now
	u.mu.Unlock()
	return wait
}

func containsFile(ps []parkedMsg, file string) bool {
	for _, p := range ps {
		if p.file == file {
			return true
		}
	}
	return false
}

// countParked sets Status.ParkedBatches to the files set aside in
// ParkDir.
func (u *Uplink) countParked() {
	n, err := countParked(u.opts.ParkDir)
	if err != nil {
		return
	}
	u.mu.Lock()
	u.st.ParkedBatches = n
	u.mu.Unlock()
}

// writeParked writes name.mqtt (topic, then payload) and name.response,
// and syncs them and dir: the batch leaves the log next.
func writeParked(dir, name, topic string, payload []byte, why string, at time.Time) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := syncfile.Write(name+".mqtt", append([]byte(topic+"\n"), payload...), 0o640); err != nil {
		return err
	}
	resp := fmt.Sprintf("PUBLISH %s\nat %s\nPUBACK %s\n", topic, at.UTC().Format(time.RFC3339), why)
	if err := syncfile.Write(name+".response", []byte(resp), 0o640); err != nil {
		return err
	}
	return syncDir(dir)
}

// retryParked publishes the messages set aside whose topic's wait is
// over, oldest first; a refusal has the rest of its topic wait again. It
// returns an error when the connection failed: the rest wait for the
// next try.
func (u *Uplink) retryParked(ctx context.Context) error {
	if err := u.loadParked(); err != nil || len(u.mq.parked) == 0 {
		return err
	}
	l := &u.mq
	defer u.countParked()
	for i := 0; i < len(l.parked); {
		p := l.parked[i]
		if l.holding(p.topic) {
			i++
			continue
		}
		b, err := os.ReadFile(p.file)
		if err != nil {
			return err
		}
		_, payload, _ := bytes.Cut(b, []byte("\n"))
		if err := u.mqttConnect(ctx); err != nil {
			return err
		}
		conn := l.conn
		err = u.await(ctx, conn, conn.publish(ctx, p.topic, payload), time.Now())
		var ref *Refusal
		switch {
		case err == nil:
			if err := errors.Join(os.Remove(p.file), os.Remove(strings.TrimSuffix(p.file, ".mqtt")+".response")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			l.parked = append(l.parked[:i], l.parked[i+1:]...)
			if w, ok := l.waits[p.topic]; ok {
				delete(l.waits, p.topic)
				u.log.Info("the broker takes a refused topic's messages again", "topic", p.topic, "refused", w.refused)
			}
		case errors.As(err, &ref):
			wait := u.refusedTopic(p.topic, ref, time.Now())
			u.log.Warn("the broker refused a message set aside again", "topic", p.topic, "reason", ref.Error(),
				"file", p.file, "in", wait.Round(time.Millisecond))
			i++
		default:
			u.mq.close()
			return err
		}
	}
	return nil
}
