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
// aside in ParkDir as <time>-<batch>.mqtt (the time it was set aside, in
// nanoseconds, 20 digits: the names sort oldest first), its topic on the
// first line and its payload after it, with <time>-<batch>.response
// saying why, so that the batch's other messages go and the cursor moves
// on. Its topic then waits a backoff (RetryWaitMin doubled at each
// refusal, up to RetryWaitMax): the batches meanwhile set that topic's
// messages aside unsent, and retryParked, before each batch and when the
// wait is over, publishes the messages set aside, oldest first, up to
// Inflight at a time. One taken is deleted. A message over the broker's
// maximum packet size (0x95) does not hold its topic up: it waits, set
// aside, for a connection to a broker that takes it. What is set aside
// of one upstream is bounded (maxSetAside, maxSetAsideFiles): past it,
// the oldest message goes, counted in Status.SetAsideDropped and logged.
// A person can also send one by hand:
//
//	tail -n +2 F.mqtt | mosquitto_pub -t "$(head -n 1 F.mqtt)" -s …

// maxSetAside and maxSetAsideFiles bound the messages one MQTT upstream
// keeps set aside: a topic refused for good must not fill the disk,
// which the disk cap does not free of them.
const (
	maxSetAside      = 64 << 20
	maxSetAsideFiles = 10000
)

// parkedMsg is a message set aside: its file, topic and size.
type parkedMsg struct {
	file, topic string
	size        int64
}

// topicWait is when a refused topic is tried again, and how often it was
// refused since it was last taken.
type topicWait struct {
	next    time.Time
	refused int
}

// loadParked reads the messages set aside by earlier runs, once. A file
// that cannot be one (no topic line: cut short) is renamed to .bad,
// logged, and left there for a person to look at.
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
		topic, size, err := readParkedTopic(name)
		if err != nil {
			u.log.Error("a message set aside cannot be read; renamed it to .bad and going on", "file", name, "err", err)
			if err := os.Rename(name, name+".bad"); err != nil {
				return err
			}
			continue
		}
		l.parked = append(l.parked, parkedMsg{file: name, topic: topic, size: size})
		l.parkedBytes += size
	}
	l.loaded = true
	return nil
}

// readParkedTopic returns the topic and size of the message set aside in
// name.
func readParkedTopic(name string) (topic string, size int64, err error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	topic, err = bufio.NewReader(f).ReadString('\n')
	if err != nil || len(topic) < 2 {
		return "", 0, fmt.Errorf("no topic line (%v)", err)
	}
	info, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	return strings.TrimSuffix(topic, "\n"), info.Size(), nil
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
// broker is down), or nothing taken, waits up to RetryWaitMax before the
// next.
func (u *Uplink) retryIdle(ctx context.Context) {
	err := u.retryParked(ctx)
	if ctx.Err() != nil {
		return
	}
	u.mq.notBefore = time.Now().Add(expBackoff(u.opts.RetryWaitMin, u.opts.RetryWaitMax, 0))
	if err != nil {
		u.mq.notBefore = time.Now().Add(expBackoff(u.opts.RetryWaitMax, u.opts.RetryWaitMax, 0))
		u.log.Warn("could not try the messages set aside again", "err", err)
	}
}

// parkRefused sets the message m of the batch id aside, which the broker
// refused with r (nil: its topic waits after a refusal, and it was not
// sent), and counts and logs a refusal. Only once it returns nil is the
// message on disk. Without a ParkDir it returns r, or, with r nil, an
// error: the batch is tried again, whole.
func (u *Uplink) parkRefused(id string, m mqttMessage, r *Refusal) error {
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
	why := "not sent: the topic waits after a refusal"
	if r != nil {
		why = r.Error()
	}
	name, err := writeParked(u.opts.ParkDir, safeName(id), m.topic, m.payload, why, now)
	if err != nil {
		return fmt.Errorf("set aside the message to %s: %w", m.topic, err)
	}
	l := &u.mq
	size := int64(len(m.topic) + 1 + len(m.payload))
	l.parked = append(l.parked, parkedMsg{file: name, topic: m.topic, size: size})
	l.parkedBytes += size
	l.setAside += len(m.seqs)
	u.mu.Lock()
	u.st.ParkedReadings += uint64(len(m.seqs))
	u.mu.Unlock()
	if err := u.boundSetAside(); err != nil {
		return err
	}
	u.countParked()
	if r == nil {
		return nil
	}
	if r.Code == 0x95 { // the message's size, not the topic: the others go
		u.refused(m.topic, r, now)
		u.log.Error("the broker takes no message this large; set it aside until one does, and going on",
			"batch", id, "topic", m.topic, "reason", r.Error(), "readings", len(m.seqs), "file", name)
		return nil
	}
	wait := u.refusedTopic(m.topic, r, now)
	u.log.Error("the broker refused a message; set it aside to try again, and going on with the others",
		"batch", id, "topic", m.topic, "reason", r.Error(), "readings", len(m.seqs), "file", name, "in", wait.Round(time.Millisecond))
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
	u.refused(topic, r, now)
	return wait
}

// refused counts a refusal r of a message to topic.
func (u *Uplink) refused(topic string, r *Refusal, now time.Time) {
	u.mu.Lock()
	u.st.Refused++
	u.st.LastError, u.st.LastErrorAt = "publish to "+topic+": "+r.Error(), &now
	u.mu.Unlock()
}

// boundSetAside deletes the oldest messages set aside while they are
// over maxSetAside or maxSetAsideFiles, the newest kept, and counts and
// logs them.
func (u *Uplink) boundSetAside() error {
	l := &u.mq
	for (l.parkedBytes > maxSetAside || len(l.parked) > maxSetAsideFiles) && len(l.parked) > 1 {
		p := l.parked[0]
		if err := removeParked(p.file); err != nil {
			return err
		}
		l.parked = l.parked[1:]
		l.parkedBytes -= p.size
		u.mu.Lock()
		u.st.SetAsideDropped++
		n := u.st.SetAsideDropped
		u.mu.Unlock()
		if n == 1 || n%100 == 0 {
			u.log.Error("messages set aside are over their bound: deleted the oldest", "topic", p.topic, "file", p.file,
				"max_bytes", maxSetAside, "max_files", maxSetAsideFiles, "set_aside_dropped", n)
		}
	}
	return nil
}

// removeParked deletes the message set aside in file and its response.
func removeParked(file string) error {
	err := errors.Join(os.Remove(file), os.Remove(strings.TrimSuffix(file, ".mqtt")+".response"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
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

// writeParked writes a new <time>-<batch>.mqtt in dir (topic, then
// payload) and its .response, each whole or not at all, and syncs dir:
// the batch leaves the log next. It returns the .mqtt file's name.
func writeParked(dir, batch, topic string, payload []byte, why string, at time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	var name string
	for ns := at.UnixNano(); ; ns++ { // a name of its own: never one set aside before
		name = filepath.Join(dir, fmt.Sprintf("%020d-%s", ns, batch))
		if _, err := os.Lstat(name + ".mqtt"); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	resp := fmt.Sprintf("PUBLISH %s\nat %s\nPUBACK %s\n", topic, at.UTC().Format(time.RFC3339), why)
	if err := syncfile.Replace(name+".response", []byte(resp), 0o640); err != nil {
		return "", err
	}
	if err := syncfile.Replace(name+".mqtt", append([]byte(topic+"\n"), payload...), 0o640); err != nil {
		return "", errors.Join(err, os.Remove(name+".response"))
	}
	return name + ".mqtt", syncDir(dir)
}

// retryParked publishes the messages set aside whose topic's wait is
// over, oldest first, up to Inflight at a time; a refusal has the rest of
// its topic wait again. A message over the connection's maximum packet
// size is left for another. It returns an error when the connection
// failed: the rest wait for the next try.
func (u *Uplink) retryParked(ctx context.Context) error {
	if err := u.loadParked(); err != nil || len(u.mq.parked) == 0 {
		return err
	}
	l := &u.mq
	defer u.countParked()
	if err := u.mqttConnect(ctx); err != nil {
		return err
	}
	conn := l.conn
	pctx, cancel := context.WithCancel(ctx) // ends the MQTT 5 publishes' waits
	defer cancel()
	type sent struct {
		p   parkedMsg
		tok pubToken
		at  time.Time
	}
	var window []sent
	gone := make(map[string]bool) // files taken, or that cannot be read
	// settle awaits the PUBACK of s.
	settle := func(s sent) error {
		var ref *Refusal
		switch err := u.await(pctx, conn, s.tok, s.at); {
		case err == nil:
			if err := removeParked(s.p.file); err != nil {
				return err
			}
			gone[s.p.file] = true
			now := time.Now()
			u.mu.Lock()
			u.st.LastSuccess = &now // the refusal in last_error is past
			u.mu.Unlock()
			if w, ok := l.waits[s.p.topic]; ok {
				delete(l.waits, s.p.topic)
				u.log.Info("the broker takes a refused topic's messages again", "topic", s.p.topic, "refused", w.refused)
			}
		case errors.As(err, &ref):
			if !l.holding(s.p.topic) { // once for the topic's messages in the window
				wait := u.refusedTopic(s.p.topic, ref, time.Now())
				u.log.Warn("the broker refused a message set aside again", "topic", s.p.topic, "reason", ref.Error(),
					"file", s.p.file, "in", wait.Round(time.Millisecond))
			}
		default:
			return err
		}
		return nil
	}
	var err error
	for _, p := range l.parked {
		if l.holding(p.topic) || conn.tooLarge(p.topic, int(p.size)-len(p.topic)-1) != nil {
			continue // a broker that takes it, later
		}
		b, rerr := os.ReadFile(p.file)
		if rerr != nil { // deleted by hand, or worse: not tried again
			gone[p.file] = true
			if !errors.Is(rerr, os.ErrNotExist) {
				u.log.Error("a message set aside cannot be read; leaving it", "file", p.file, "err", rerr)
			}
			continue
		}
		_, payload, _ := bytes.Cut(b, []byte("\n"))
		if len(window) == u.opts.MQTT.Inflight {
			if err = settle(window[0]); err != nil {
				break
			}
			window = window[1:]
		}
		if err = u.limit.wait(ctx, int64(len(payload))); err != nil {
			break
		}
		window = append(window, sent{p, conn.publish(pctx, p.topic, payload), time.Now()})
	}
	for _, s := range window {
		if err != nil {
			break
		}
		err = settle(s)
	}
	kept := l.parked[:0]
	for _, p := range l.parked {
		if gone[p.file] {
			l.parkedBytes -= p.size
			continue
		}
		kept = append(kept, p)
	}
	l.parked = kept
	if err != nil && ctx.Err() == nil {
		l.close()
	}
	return err
}
