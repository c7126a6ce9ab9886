package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// commitPolicyConfig is cairn with the embedded broker and a commit_wait
// of 5 s, the longest allowed: a commit that waits is plain to see.
const commitPolicyConfig = localConfig + `store:
  commit_wait: 5s
`

// storeCounts returns the group commits and the readings stored so far.
func storeCounts(t *testing.T, api *apiClient) (commits, stored uint64) {
	t.Helper()
	st := storeStatus(t, api)
	return st.Store.Commits, st.Ingest.Stored
}

// commitStatus is what /v1/status says of the group commits.
type commitStatus struct {
	Store struct {
		Commits  uint64 `json:"commits"`
		Gathered uint64 `json:"gathered_commits"`
	} `json:"store"`
	Ingest struct {
		Stored uint64 `json:"stored"`
	} `json:"ingest"`
	MQTT struct {
		Clients int64 `json:"clients"`
	} `json:"mqtt"`
}

// storeStatus returns what /v1/status says of the group commits.
func storeStatus(t *testing.T, api *apiClient) commitStatus {
	t.Helper()
	var st commitStatus
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", code)
	}
	return st
}

// TestRun_CommitPolicyLonePublisher: a paho client that waits for each
// PUBACK before it sends the next message, alone on the broker, is not
// held up by commit_wait (5 s here, so that a single wait shows): each
// PUBACK comes once its reading is stored, and each message is a commit
// of its own, at once. A client that has just sent and disconnected is
// not waited for. A client that sends for several devices in turn waits
// once, until it has shown that it waits for its PUBACKs.
func TestRun_CommitPolicyLonePublisher(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), commitPolicyConfig))
	api := newAPIClient(d.http)
	for _, devices := range []int{1, 4} {
		// A client that is gone: nothing waits for it.
		gone := mustConnect(t, d.mqtt, fmt.Sprintf("gone-%d", devices))
		if tok := gone.Publish("sensors/gone/telemetry", 1, false, fmt.Sprintf(`{"t":%d}`, devices)); !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
			t.Fatalf("the client that goes: no PUBACK (%v)", tok.Error())
		}
		gone.Disconnect(0)
		// The broker forgets a client before it stops counting it: once
		// it is not counted, the Writer has been told it is gone.
		for deadline := time.Now().Add(ackTimeout); storeStatus(t, api).MQTT.Clients > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the client that went is still counted after %s", ackTimeout)
			}
		}
		c := mustConnect(t, d.mqtt, fmt.Sprintf("lone-%d", devices))
		const n = 40
		c0, s0 := storeCounts(t, api)
		g0 := storeStatus(t, api).Store.Gathered
		start := time.Now()
		for i := range n {
			tok := c.Publish(fmt.Sprintf("sensors/lone%d-%d/telemetry", devices, i%devices), 1, false, fmt.Sprintf(`{"t":%d}`, i))
			if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
				t.Fatalf("%d devices, message %d: no PUBACK (%v)", devices, i, tok.Error())
			}
			// Promise 1: acknowledged once stored.
			if _, stored := storeCounts(t, api); stored < s0+uint64(i+1) {
				t.Fatalf("%d devices, message %d acknowledged with %d readings stored; want %d", devices, i, stored-s0, i+1)
			}
		}
		took := time.Since(start)
		c.Disconnect(0)
		c1, s1 := storeCounts(t, api)
		if s1-s0 != n || c1-c0 != n {
			t.Errorf("%d devices: %d readings stored in %d commits; want %d in %d", devices, s1-s0, c1-c0, n, n)
		}
		// A wait lasts until the sender waited for has not sent for
		// commit_wait, 5 s. None for one device; one for several: the
		// client's first message for a second device waits for the
		// first, and that commit shows that the client sends nothing
		// while it waits for a PUBACK.
		waits := time.Duration(min(devices-1, 1))
		if g := storeStatus(t, api).Store.Gathered - g0; g != uint64(waits) {
			t.Errorf("%d devices: %d commits waited to gather other sensors (store.gathered_commits); want %d", devices, g, waits)
		}
		if most := waits*5*time.Second + 4*time.Second; took > most {
			t.Errorf("%d devices: %d messages took %s; want less than %s, %d commit_wait(s) of 5 s at most", devices, n, took, most, waits)
		}
		t.Logf("%d devices: %d messages in %s", devices, n, took.Round(time.Millisecond))
	}
}

// TestRun_CommitPolicyGathersOtherSensors: sensors that send on their own
// clock, each a client of its own, are gathered into few commits, and a
// client that waits for each PUBACK is gathered with them while they
// send: fewer commits than messages, every message stored.
func TestRun_CommitPolicyGathersOtherSensors(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), commitPolicyConfig))
	api := newAPIClient(d.http)
	const sensors, rounds = 5, 15
	var clients []paho.Client
	for i := range sensors {
		c := mustConnect(t, d.mqtt, fmt.Sprintf("sensor-%d", i))
		defer c.Disconnect(0)
		clients = append(clients, c)
	}
	lone := mustConnect(t, d.mqtt, "lone")
	defer lone.Disconnect(0)
	c0, s0 := storeCounts(t, api)
	g0 := storeStatus(t, api).Store.Gathered

	var wg sync.WaitGroup
	wait := func(what string, tok paho.Token) {
		defer wg.Done()
		if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
			t.Errorf("%s: no PUBACK (%v)", what, tok.Error())
		}
	}
	// The sensors: one message each every 100 ms, not waiting for PUBACKs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for r := range rounds {
			<-tick.C
			for i, c := range clients {
				wg.Add(1)
				go wait(fmt.Sprintf("sensor %d, round %d", i, r), c.Publish(fmt.Sprintf("sensors/sensor-%d/telemetry", i), 1, false, fmt.Sprintf(`{"t":%d}`, r)))
			}
		}
	}()
	// The lone client, each message after the PUBACK of the one before,
	// while the sensors send.
	const loneN = 5
	for i := range loneN {
		wg.Add(1)
		wait(fmt.Sprintf("lone, message %d", i), lone.Publish("sensors/lone/telemetry", 1, false, fmt.Sprintf(`{"t":%d}`, i)))
	}
	wg.Wait()
	c1, s1 := storeCounts(t, api)
	messages := uint64(sensors*rounds + loneN)
	if s1-s0 != messages {
		t.Errorf("readings stored: got %d, want %d", s1-s0, messages)
	}
	if commits := c1 - c0; commits*3 > messages {
		t.Errorf("%d messages in %d commits; want at most one commit for three messages", messages, commits)
	}
	t.Logf("%d messages in %d commits", messages, c1-c0)

	// The commits that waited are counted, the same in /v1/status,
	// /metrics and cairn status.
	g := storeStatus(t, api).Store.Gathered
	if g == g0 || g-g0 > c1-c0 {
		t.Errorf("store.gathered_commits: %d of %d commits waited to gather other sensors; want some, at most all", g-g0, c1-c0)
	}
	_, body, err := api.fetch("/metrics")
	if want := fmt.Sprintf("cairn_store_gathered_commits_total %d\n", g); err != nil || !strings.Contains(string(body), want) {
		t.Errorf("/metrics: %v, want %q; got %q", err, want, grepLines(body, "commits"))
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"status", "-url", "http://" + d.http, "-sample", "0"}, &out, io.Discard); err != nil {
		t.Fatalf("cairn status: %v", err)
	}
	if want := fmt.Sprintf(" ms each, %d waited to gather other sensors)", g); !strings.Contains(out.String(), want) {
		t.Errorf("cairn status lacks %q:\n%s", want, out.String())
	}
}
