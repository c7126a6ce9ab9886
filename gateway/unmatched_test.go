package gateway

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestUnmatched_CountsListsAndLogsOnceAnHour: every message counts; the
// status lists the last topics, each once, newest first; a topic is
// logged once an hour; a flood of new topics is listed and counted but
// logs at most maxUnmatchedLogged of them an hour.
func TestUnmatched_CountsListsAndLogsOnceAnHour(t *testing.T) {
	var logs bytes.Buffer
	u := unmatchedTopics{log: slog.New(slog.NewTextHandler(&logs, nil))}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	u.add("zigbee2mqtt/bridge/state", t0)
	u.add("homeassistant/sensor/x/config", t0.Add(time.Second))
	u.add("zigbee2mqtt/bridge/state", t0.Add(2*time.Second))
	total, recent := u.stats()
	if total != 3 || len(recent) != 2 || recent[0].Topic != "zigbee2mqtt/bridge/state" || recent[0].Messages != 2 ||
		!recent[0].Last.Equal(t0.Add(2*time.Second)) || recent[1].Topic != "homeassistant/sensor/x/config" {
		t.Fatalf("total %d, recent %+v", total, recent)
	}
	if n := strings.Count(logs.String(), "topic=zigbee2mqtt/bridge/state"); n != 1 {
		t.Errorf("logged the topic %d times in a minute, want once:\n%s", n, logs.String())
	}
	u.add("zigbee2mqtt/bridge/state", t0.Add(time.Hour+time.Second))
	if n := strings.Count(logs.String(), "topic=zigbee2mqtt/bridge/state"); n != 2 {
		t.Errorf("logged the topic %d times over an hour, want twice", n)
	}

	// A flood of new topics.
	logs.Reset()
	for i := range 3 * maxUnmatchedLogged {
		u.add(fmt.Sprintf("junk/%d", i), t0.Add(2*time.Hour))
	}
	total, recent = u.stats()
	if total != 4+3*maxUnmatchedLogged || len(recent) != maxUnmatched || recent[0].Topic != fmt.Sprintf("junk/%d", 3*maxUnmatchedLogged-1) {
		t.Errorf("after the flood: total %d, %d recent, newest %q", total, len(recent), recent[0].Topic)
	}
	if n := strings.Count(logs.String(), "\n"); n > maxUnmatchedLogged || len(u.logged) > maxUnmatchedLogged {
		t.Errorf("the flood logged %d lines and remembers %d topics, want at most %d", n, len(u.logged), maxUnmatchedLogged)
	}
	// An hour later, new topics are logged again.
	logs.Reset()
	u.add("junk/new", t0.Add(3*time.Hour+time.Second))
	if !strings.Contains(logs.String(), "topic=junk/new") {
		t.Errorf("a new topic an hour after the flood was not logged")
	}
}
