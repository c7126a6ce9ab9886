package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/httpapi"
	"github.com/cairn-gateway/cairn/uplink"
)

// TestPrintStatus_Counts prints a status where every count is 1, then
// one where every count is 2: each is worded in the singular, then in
// the plural, and the ingest counts say they are since start.
func TestPrintStatus_Counts(t *testing.T) {
	status := func(n uint64) httpapi.Status {
		var st httpapi.Status
		st.Started = time.Now()
		st.MQTT = httpapi.MQTTStatus{Mode: "embedded", Address: "127.0.0.1:1883", Connected: true, Clients: int64(n)}
		in := &st.Ingest
		in.Messages, in.Stored, in.Duplicates, in.Restamped, in.Unmatched, in.Refused = n, n, n, n, n, n
		in.RecentUnmatched = []gateway.Unmatched{{Topic: "a/b"}}
		s := &st.Store
		s.Readings, s.Commits, s.CommitErrors, s.SealErrors, s.Pruned, s.StatsPruned = n, n, n, n, n, n
		s.MaxSeries = 10
		s.Gathered = n
		st.Retention = &buffer.RetentionStatus{RemovedReadings: n}
		st.Uplink = &uplink.Status{SentReadings: n, SentBatches: n, Retries: n, ParkedBatches: n, Skipped: n, Refused: n}
		return st
	}
	for _, tc := range []struct {
		n     uint64
		words []string
	}{
		{1, []string{"listening, 1 client\n", "ingest: since start 1 message, 1 reading stored, 1 duplicate,",
			"  1 reading given the receive time", "  1 message on topics no", "store:  1 reading in ", ", 1 commit (", " ms each, 1 waited to gather other sensors), ",
			"1 commit error, 1 seal error\n", "1 reading refused for a new series", "retention removed 1 reading and 1 aggregate record\n",
			", 1 reading removed,", "1 reading in 1 batch sent", ", 1 retry", ", 1 batch parked", ", 1 reading skipped", ", 1 message refused by the broker"}},
		{2, []string{"listening, 2 clients\n", "ingest: since start 2 messages, 2 readings stored, 2 duplicates,",
			"  2 readings given the receive time", "  2 messages on topics no", "store:  2 readings in ", ", 2 commits (", " ms each, 2 waited to gather other sensors), ",
			"2 commit errors, 2 seal errors\n", "2 readings refused for a new series", "retention removed 2 readings and 2 aggregate records\n",
			", 2 readings removed,", "2 readings in 2 batches sent", ", 2 retries", ", 2 batches parked", ", 2 readings skipped", ", 2 messages refused by the broker"}},
	} {
		var out bytes.Buffer
		printStatus(&out, status(tc.n), nil)
		for _, w := range tc.words {
			if !strings.Contains(out.String(), w) {
				t.Errorf("counts of %d: status lacks %q:\n%s", tc.n, w, out.String())
			}
		}
	}
}
