package gateway

import (
	"log/slog"
	"sync"
	"time"
)

// A message on a topic that no route's pattern matches is not an error
// (Home Assistant's discovery, a bridge's own state), but it is the first
// thing a user whose device does not show up needs to see: it is counted,
// the last few topics are kept for the status, and each topic is logged
// at info once an hour.

const (
	// maxUnmatched is how many recent unmatched topics the status keeps.
	maxUnmatched = 10
	// unmatchedLogEvery is how often one topic is logged at most, and
	// maxUnmatchedLogged how many topics are remembered for that: a flood
	// of new topics is logged up to that many an hour.
	unmatchedLogEvery  = time.Hour
	maxUnmatchedLogged = 1024
)

// Unmatched is a topic that no pattern of mqtt.topics matched.
type Unmatched struct {
	Topic    string    `json:"topic"`
	Last     time.Time `json:"last"`     // when a message on it came last
	Messages uint64    `json:"messages"` // since it was last among the recent
}

// unmatchedTopics keeps the count and the recent topics. It is safe for
// concurrent use.
type unmatchedTopics struct {
	mu     sync.Mutex
	total  uint64
	recent []Unmatched          // newest last, at most maxUnmatched, each topic once
	logged map[string]time.Time // when each topic was logged
	log    *slog.Logger
}

// add counts a message on topic received at now.
func (u *unmatchedTopics) add(topic string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.total++
	var entry Unmatched
	for i := range u.recent {
		if u.recent[i].Topic == topic {
			entry = u.recent[i]
			u.recent = append(u.recent[:i], u.recent[i+1:]...)
			break
		}
	}
	if entry.Topic == "" {
		entry.Topic = topic
		if len(u.recent) == maxUnmatched {
			u.recent = append(u.recent[:0], u.recent[1:]...)
		}
	}
	entry.Last, entry.Messages = now.UTC(), entry.Messages+1
	u.recent = append(u.recent, entry)

	if last, ok := u.logged[topic]; ok && now.Sub(last) < unmatchedLogEvery && now.After(last) {
		return
	}
	if u.logged == nil {
		u.logged = make(map[string]time.Time)
	}
	if _, ok := u.logged[topic]; !ok && len(u.logged) >= maxUnmatchedLogged {
		for t, at := range u.logged {
			if now.Sub(at) >= unmatchedLogEvery || now.Before(at) {
				delete(u.logged, t)
			}
		}
		if len(u.logged) >= maxUnmatchedLogged {
			return // counted and listed, not logged
		}
	}
	u.logged[topic] = now
	u.log.Info("message on a topic that no mqtt.topics pattern matches: not stored; add a pattern for it if it is a sensor's (logged once an hour per topic)", "topic", topic)
}

// stats returns the count and the recent topics, newest first.
func (u *unmatchedTopics) stats() (uint64, []Unmatched) {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Unmatched, 0, len(u.recent))
	for i := len(u.recent) - 1; i >= 0; i-- {
		out = append(out, u.recent[i])
	}
	return u.total, out
}
