package buffer

import "time"

// The commit policy: a group commit waits for more readings, up to
// WriterOptions.Wait after its first came, only while a sensor that is
// not in it has sent within the last Wait, and so may still join it: up
// to twice the longest time it took lately between two messages. A
// sensor is a device as one publisher sends it. A publisher that waits
// for its PUBACKs (clocked) and has messages in the commit is not waited
// for, none of its sensors, since it sends no more until the commit is
// done. A publisher is taken to wait for its PUBACKs once it sent nothing
// while a commit that waited held its messages, and no longer once it
// sends while a commit holds them; a publisher that is gone (Forget) is
// forgotten at once.
//
// A lone publisher that waits for each PUBACK is therefore never held up,
// and a hundred sensors sending on their own clocks are gathered into a
// commit about once a Wait: every sync writes at least a page, and an SD
// card wears by the pages written.

// sender is one device as one publisher sends it: a node of the list of
// senders, newest first.
type sender struct {
	key   senderKey
	pub   *publisher
	last  time.Time // when its newest message was taken
	batch uint64    // the commit that holds its newest message
	// gap is the longest time between two of its messages lately (each
	// message takes an eighth off it); 0 until its second message.
	gap        time.Duration
	prev, next *sender
}

// due returns when s is expected to have sent again, if it still sends:
// twice its gap after its last message, and no later than Wait after it.
func (s *sender) due(wait time.Duration) time.Time {
	if s.gap > 0 && 2*s.gap < wait {
		return s.last.Add(2 * s.gap)
	}
	return s.last.Add(wait)
}

type senderKey struct{ from, device string }

// publisher is one MQTT client (or the external broker's subscription,
// whose publishers cairn does not see).
type publisher struct {
	senders int       // its senders in the list
	batch   uint64    // the commit that holds its newest message
	last    time.Time // when its newest message was taken
	// clocked reports whether it waits for its PUBACKs: it sent nothing
	// while the last commit that waited held its messages, and has not
	// sent while a commit held them since. A publisher starts out not
	// clocked.
	clocked bool
}

// publishers tracks who sent recently, for the commit policy. Used by the
// Writer's Run goroutine only.
type publishers struct {
	wait    time.Duration // WriterOptions.Wait
	senders map[senderKey]*sender
	pubs    map[string]*publisher
	head    *sender // the newest
	tail    *sender // the oldest
	// first is the newest sender that is not in the commit being
	// gathered: senders of the commit are taken after it began, so they
	// are the list's head up to first.
	first   *sender
	batch   uint64       // the commit being gathered
	members []*publisher // the publishers with messages in it
	waited  time.Time    // when it began to wait; zero if it did not
	// committed is when the last commit was done: a message submitted
	// before it by a publisher with messages in that commit was sent
	// while they were held.
	committed time.Time
}

func newPublishers(wait time.Duration) publishers {
	return publishers{wait: wait, senders: make(map[senderKey]*sender), pubs: make(map[string]*publisher)}
}

// begin starts a new commit to gather.
func (p *publishers) begin() {
	p.batch++
	p.first = p.head
	p.members = p.members[:0]
	p.waited = time.Time{}
}

// take records the readings of a message from publisher from, submitted
// at sent and taken into the commit being gathered at now.
func (p *publishers) take(from string, readings []Reading, sent, now time.Time) {
	if p.wait <= 0 {
		return
	}
	pub := p.pubs[from]
	if pub == nil {
		pub = &publisher{}
		p.pubs[from] = pub
	}
	if pub.batch != p.batch {
		if pub.batch == p.batch-1 && sent.Before(p.committed) {
			pub.clocked = false // it sent while the last commit held its messages
		}
		pub.batch = p.batch
		p.members = append(p.members, pub)
	}
	pub.last = now
	prev := ""
	for i := range readings {
		d := readings[i].Device
		if i > 0 && d == prev {
			continue
		}
		prev = d
		p.touch(senderKey{from, d}, pub, now)
	}
}

// touch moves the sender of key to the head of the list, in the commit
// being gathered.
func (p *publishers) touch(key senderKey, pub *publisher, now time.Time) {
	s := p.senders[key]
	if s == nil {
		s = &sender{key: key, pub: pub}
		p.senders[key] = s
		pub.senders++
	} else {
		s.gap = max(now.Sub(s.last), s.gap-s.gap/8)
		if s.batch == p.batch && s == p.head {
			s.last = now
			return
		}
		p.unlink(s)
	}
	s.last, s.batch = now, p.batch
	s.next = p.head
	if p.head != nil {
		p.head.prev = s
	}
	p.head = s
	if p.tail == nil {
		p.tail = s
	}
}

func (p *publishers) unlink(s *sender) {
	if p.first == s {
		p.first = s.next
	}
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		p.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		p.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

// remove forgets s.
func (p *publishers) remove(s *sender) {
	p.unlink(s)
	delete(p.senders, s.key)
	if s.pub.senders--; s.pub.senders == 0 && s.pub.batch != p.batch {
		delete(p.pubs, s.key.from)
	}
}

// forget forgets publisher from: it is gone, and sends nothing more.
func (p *publishers) forget(from string) {
	if p.pubs[from] == nil {
		return
	}
	for s := p.head; s != nil; {
		next := s.next
		if s.key.from == from {
			p.remove(s)
		}
		s = next
	}
	delete(p.pubs, from)
}

// maxSkipped bounds the senders until scans past that cannot join: those
// overdue, and those of publishers that wait for their PUBACKs.
const maxSkipped = 256

// until returns when the commit being gathered stops waiting for senders
// not in it, at now: when the newest of those that may still join is due
// and has not sent. It returns the zero time if none may join. Senders
// that are overdue, and those of publishers that wait for their PUBACKs,
// are passed over, maxSkipped of them at most.
func (p *publishers) until(now time.Time) time.Time {
	p.expire(now)
	skipped := 0
	for s := p.first; s != nil && skipped < maxSkipped; s = s.next {
		if !s.last.Add(p.wait).After(now) {
			break // the rest are older
		}
		end := s.due(p.wait)
		if !end.After(now) || s.pub.batch == p.batch && s.pub.clocked {
			skipped++
			continue
		}
		if p.waited.IsZero() {
			p.waited = now
		}
		return end
	}
	return time.Time{}
}

// expire forgets the oldest senders not in the commit being gathered
// that have sent nothing for Wait.
func (p *publishers) expire(now time.Time) {
	for s := p.tail; s != nil && s.batch != p.batch && !s.last.Add(p.wait).After(now); s = p.tail {
		p.remove(s)
	}
}

// done ends the commit that was gathered, at now: if it waited, each
// publisher with messages in it that sent nothing while it waited is
// clocked, and the others are not.
func (p *publishers) done(now time.Time) {
	p.committed = now
	if p.waited.IsZero() {
		return
	}
	for _, pub := range p.members {
		pub.clocked = !pub.last.After(p.waited)
	}
}

// gathered reports whether the commit that was gathered waited for others.
func (p *publishers) gathered() bool { return !p.waited.IsZero() }
