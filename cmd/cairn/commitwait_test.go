package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestRun_CommitWaitDefault runs cairn with the default commit policy: a
// light stream (sensors sending on their own clock) is committed about
// once a commit_wait, with every PUBACK within a second, and a burst of a
// publisher with many messages in flight is committed at once.
func TestRun_CommitWaitDefault(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), localConfig+`store:
  commit_wait: 750ms
`))
	api := newAPIClient(d.http)
	commits := func() uint64 {
		var st struct {
			Store struct {
				Commits uint64 `json:"commits"`
			} `json:"store"`
		}
		if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
			t.Fatalf("GET /v1/status: %d", code)
		}
		return st.Store.Commits
	}
	c := mustConnect(t, d.mqtt, "light")
	defer c.Disconnect(0)

	// 60 messages of 2 readings, one every 25 ms: 80 readings a second.
	before := commits()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var longest time.Duration
	for i := range 60 {
		at := time.Now()
		tok := c.Publish(fmt.Sprintf("sensors/light-%d/telemetry", i%10), 1, false, fmt.Sprintf(`{"t":%d,"h":%d}`, i, i))
		wg.Add(1)
		go func(tok paho.Token) {
			defer wg.Done()
			if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
				t.Errorf("message %d: no PUBACK (%v)", i, tok.Error())
				return
			}
			mu.Lock()
			longest = max(longest, time.Since(at))
			mu.Unlock()
		}(tok)
		time.Sleep(25 * time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := commits() - before
	if most := uint64(elapsed/(750*time.Millisecond)) + 2; n > most {
		t.Errorf("a light stream of 60 messages over %s took %d commits; want at most %d (one a commit_wait)", elapsed, n, most)
	}
	if longest > time.Second {
		t.Errorf("a PUBACK took %s; want at most a second", longest)
	}
	t.Logf("light stream: 60 messages over %s in %d commits, longest PUBACK %s", elapsed.Round(time.Millisecond), n, longest.Round(time.Millisecond))

	// 100 messages in flight (200 readings): no waiting.
	start = time.Now()
	toks := make([]paho.Token, 100)
	for i := range toks {
		toks[i] = c.Publish(fmt.Sprintf("sensors/burst-%d/telemetry", i%10), 1, false, fmt.Sprintf(`{"t":%d,"h":%d}`, i, i))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
			t.Fatalf("burst: no PUBACK (%v)", tok.Error())
		}
	}
	if took := time.Since(start); took >= 750*time.Millisecond {
		t.Errorf("a burst of 100 messages took %s to be acknowledged; want less than commit_wait", took)
	}
}
