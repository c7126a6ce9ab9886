package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/dashboard"
	"github.com/cairn-gateway/cairn/gateway/httpapi"
	"github.com/cairn-gateway/cairn/uplink"
)

// runStatus asks a running cairn for /v1/status and prints it for people.
func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration `file` whose http.listen and http.token_file to use (default: none)")
	url := fs.String("url", "", "cairn's HTTP `address`: host:port or a URL (default: the configuration's http.listen, else "+defaultStatusURL+")")
	tokenArg := fs.String("token", "", "the bearer `token` of http.token_file (visible to other users in ps: prefer -token-file)")
	tokenFile := fs.String("token-file", "", "`file` holding the bearer token (default: the configuration's http.token_file)")
	sample := fs.Duration("sample", time.Second, "measure ingest and uplink rates over this `interval` (0: don't)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("status: unexpected argument %q", fs.Arg(0))
	}
	target, err := findStatusTarget(*path, *url, *tokenArg, *tokenFile)
	if err != nil {
		return err
	}
	base, token := target.base, target.token
	client := &http.Client{Timeout: 5 * time.Second}
	fetch := func() (httpapi.Status, error) {
		var st httpapi.Status
		req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/status", nil)
		if err != nil {
			return st, fmt.Errorf("status: %w", err)
		}
		if token != nil {
			req.Header.Set("Authorization", "Bearer "+string(token))
		}
		resp, err := client.Do(req)
		if err != nil {
			return st, fmt.Errorf("status: %w (is cairn running? -url or -config names another address)", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			return st, fmt.Errorf("status: %s answered %s: %s", base, resp.Status, target.unauthorized())
		}
		if resp.StatusCode != http.StatusOK {
			return st, fmt.Errorf("status: %s answered %s%s", base, resp.Status, answerReason(resp))
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return st, fmt.Errorf("status: %s: %w", base, err)
		}
		return st, nil
	}
	st, err := fetch()
	if err != nil {
		return err
	}
	var r *rates
	if *sample > 0 {
		start := time.Now()
		time.Sleep(*sample)
		st2, err := fetch()
		if err != nil {
			return err
		}
		r = ratesBetween(st, st2, time.Since(start))
		st = st2
	}
	printStatus(stdout, st, r)
	return nil
}

// answerReason is the reason a refusal of cairn's API gives in its JSON
// "error" field (too many failed authentications, a host not served, not
// ready…), as ": reason", or "" when the body has none.
func answerReason(resp *http.Response) string {
	var body struct {
		Error string `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&body) != nil || body.Error == "" {
		return ""
	}
	return ": " + body.Error
}

// rates are what changed per second between two status documents.
type rates struct {
	messages, stored float64
	sent             map[string]float64 // by upstream
}

func ratesBetween(a, b httpapi.Status, d time.Duration) *rates {
	per := func(x, y uint64) float64 {
		if y < x { // restarted in between
			return 0
		}
		return float64(y-x) / d.Seconds()
	}
	r := &rates{messages: per(a.Ingest.Messages, b.Ingest.Messages), stored: per(a.Ingest.Stored, b.Ingest.Stored), sent: map[string]float64{}}
	for _, bu := range statusUplinks(b) {
		for _, au := range statusUplinks(a) {
			if au.Name == bu.Name {
				r.sent[bu.Name] = per(au.SentReadings, bu.SentReadings)
			}
		}
	}
	return r
}

func printStatus(w io.Writer, st httpapi.Status, r *rates) {
	up := time.Duration(st.UptimeSeconds) * time.Second
	fmt.Fprintf(w, "cairn %s, up %s (since %s)\n", st.Version, up, st.Started.Format(time.RFC3339))
	conn := "not connected"
	if st.MQTT.Connected {
		conn = "connected"
		if st.MQTT.Mode == "embedded" {
			conn = "listening, " + quantity(st.MQTT.Clients, "client", "clients")
		}
	}
	fmt.Fprintf(w, "mqtt:   %s broker %s, %s\n", st.MQTT.Mode, st.MQTT.Address, conn)
	if m := st.MQTT; m.LastError != "" && m.LastErrorAt != nil {
		fmt.Fprintf(w, "        last error %s (%s): %s\n", m.LastErrorAt.Format(time.RFC3339), quantity(int64(m.FailedAttempts), "attempt", "attempts")+" failed", m.LastError)
	}
	if st.MQTT.Refused > 0 {
		reasons := gateway.SortedReasons(st.MQTT.RefusedByReason)
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%s %d", r, st.MQTT.RefusedByReason[r])
		}
		fmt.Fprintf(w, "        refused %d (%s)\n", st.MQTT.Refused, strings.Join(parts, ", "))
	}
	in := st.Ingest
	if r != nil {
		fmt.Fprintf(w, "ingest: now %.0f messages/s, %.0f readings/s stored\n        since start ", r.messages, r.stored)
	} else {
		fmt.Fprint(w, "ingest: since start ")
	}
	fmt.Fprintf(w, "%s, %s stored, %s, %d not stored, %d rejected",
		quantity(in.Messages, "message", "messages"), quantity(in.Stored, "reading", "readings"),
		quantity(in.Duplicates, "duplicate", "duplicates"), in.Failed, in.Rejected)
	if len(in.ByReason) > 0 {
		reasons := in.Reasons()
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%s %d", r, in.ByReason[r])
		}
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if in.Paused {
		fmt.Fprintf(w, "        PAUSED: messages are not acknowledged until there is room: %s\n", in.PausedReason)
	}
	if len(in.Examples) > 0 {
		ex := in.Examples[0]
		fmt.Fprintf(w, "        last rejected: %s on %s: %s\n", ex.Time.Format(time.RFC3339), ex.Topic, ex.Detail)
	}
	if in.Restamped > 0 {
		fmt.Fprintf(w, "        %s given the receive time: their device's clock was never set (a date before 2000)\n", quantity(in.Restamped, "reading", "readings"))
	}
	if len(in.Skipped) > 0 {
		kinds := slices.Sorted(maps.Keys(in.Skipped))
		parts := make([]string, len(kinds))
		for i, k := range kinds {
			parts[i] = fmt.Sprintf("%s %d", k, in.Skipped[k])
		}
		fmt.Fprintf(w, "        skipped, not readings: %s\n", strings.Join(parts, ", "))
	}
	if in.Unmatched > 0 {
		topics := make([]string, 0, 3)
		for _, u := range in.RecentUnmatched[:min(3, len(in.RecentUnmatched))] {
			topics = append(topics, u.Topic)
		}
		fmt.Fprintf(w, "        %s on topics no mqtt.topics pattern matches, not stored (last: %s): a device that does not show up needs a pattern for its topic\n",
			quantity(in.Unmatched, "message", "messages"), strings.Join(topics, ", "))
	}
	s := st.Store
	fmt.Fprintf(w, "store:  %s in %d series, %s on disk, %s (%.2f ms each, %d waited to gather other sensors), %s, %s\n",
		quantity(s.Readings, "reading", "readings"), s.Series, size(s.DiskBytes), quantity(s.Commits, "commit", "commits"), s.CommitMillis, s.Gathered,
		quantity(s.CommitErrors, "commit error", "commit errors"), quantity(s.SealErrors, "seal error", "seal errors"))
	if s.MaxSeries > 0 || s.MaxSeriesPerDevice > 0 || in.Refused > 0 {
		fmt.Fprintf(w, "        series: at most %s a device, %s in all; %s refused for a new series over a limit\n",
			seriesLimit(s.MaxSeriesPerDevice), seriesLimit(s.MaxSeries), quantity(in.Refused, "reading", "readings"))
	}
	if in.WrongKind+in.TooManyStates > 0 {
		fmt.Fprintf(w, "        texts: %s refused for the other kind than their series (wrong_kind), %s for a new text over store.max_states_per_series (too_many_states)\n",
			quantity(in.WrongKind, "reading", "readings"), quantity(in.TooManyStates, "reading", "readings"))
	}
	if s.DiskReserveBytes > 0 {
		fmt.Fprintf(w, "        %s free on its file system (ingest pauses below %s)", size(s.DiskFreeBytes), size(s.DiskReserveBytes))
		if s.ReserveFileBytes == 0 {
			fmt.Fprint(w, ", no reserve file")
		}
		fmt.Fprintln(w)
	}
	if s.ForeignBytes > 0 {
		fmt.Fprintf(w, "        %s in files that are not cairn's (%s): not counted by the cap, never deleted\n",
			size(s.ForeignBytes), strings.Join(s.ForeignFiles, ", "))
	}
	if s.Pruned > 0 || s.StatsPruned > 0 {
		fmt.Fprintf(w, "        retention removed %s and %s\n", quantity(s.Pruned, "reading", "readings"), quantity(s.StatsPruned, "aggregate record", "aggregate records"))
	}
	printRetention(w, st.Retention)
	printClock(w, st.Clock)
	printUplinks(w, statusUplinks(st), r)
}

// statusUplinks returns the upstreams of st: its uplinks, or its one uplink
// from a daemon before lists.
func statusUplinks(st httpapi.Status) []uplink.Status {
	if len(st.Uplinks) == 0 && st.Uplink != nil {
		return []uplink.Status{*st.Uplink}
	}
	return st.Uplinks
}

// printUplinks says of each upstream whether it keeps up, and if not,
// why: one line each, "uplink vm: …", or "uplink: …" for the one named
// default (the single uplink: block's).
func printUplinks(w io.Writer, us []uplink.Status, r *rates) {
	if len(us) == 0 {
		fmt.Fprintln(w, "uplink: off (no uplink.url): readings stay on this gateway")
		return
	}
	for i := range us {
		printUplink(w, &us[i], r)
	}
}

// printClock says whether the clock is trusted, and why.
func printClock(w io.Writer, c *buffer.ClockStatus) {
	if c == nil {
		return
	}
	trust := "trusted"
	if !c.Trusted {
		trust = "NOT TRUSTED (retention by age paused)"
	}
	fmt.Fprintf(w, "clock:  %s, synchronised: %s, %s: %s\n", c.Now.Format(time.RFC3339), c.Synced, trust, c.Reason)
	for _, sp := range c.UntrustedSpans[max(0, len(c.UntrustedSpans)-3):] { // the newest
		kept := "kept until the clock is trusted"
		if !sp.TrustedAt.IsZero() {
			kept = "trusted since " + sp.TrustedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "        readings stamped by an untrusted clock from %s to %s: %s\n", sp.From.Format(time.RFC3339), sp.To.Format(time.RFC3339), kept)
	}
}

// seriesLimit formats a limit on series.
func seriesLimit(n int) string {
	if n == 0 {
		return "no limit"
	}
	return strconv.Itoa(n)
}

// printRetention says what retention removed, against which cap, and why
// it may be paused.
func printRetention(w io.Writer, r *buffer.RetentionStatus) {
	if r == nil {
		return
	}
	capacity := "no disk cap"
	if r.MaxDiskBytes > 0 {
		capacity = fmt.Sprintf("%s of a %s cap", size(r.DiskBytes), size(r.MaxDiskBytes))
	}
	fmt.Fprintf(w, "retention: %s, %s removed, %d dropped unsent", capacity, quantity(r.RemovedReadings, "reading", "readings"), r.DroppedUnsent)
	if r.OldestReading != nil && r.NewestReading != nil {
		fmt.Fprintf(w, ", readings from %s to %s", r.OldestReading.Format(time.RFC3339), r.NewestReading.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	printDiskLimit(w, r)
	if r.PausedReason != "" {
		fmt.Fprintf(w, "        %s\n", r.PausedReason)
	}
}

// printDiskLimit says which limit binds the store's size: the disk cap,
// the file system's free space, or the reserve.
func printDiskLimit(w io.Writer, r *buffer.RetentionStatus) {
	switch r.DiskLimit {
	case buffer.LimitCap:
		fmt.Fprintf(w, "        limit: the disk cap (%s)\n", size(r.EffectiveMaxDiskBytes))
	case buffer.LimitFree:
		fmt.Fprintf(w, "        limit: the file system's free space: %s for the store beside the reserve, less than the %s cap\n",
			size(r.EffectiveMaxDiskBytes), size(r.MaxDiskBytes))
	case buffer.LimitReserve:
		fmt.Fprintf(w, "        limit: the reserve: less than it is free; ingest waits while the oldest data goes (%s for the store)\n",
			size(r.EffectiveMaxDiskBytes))
	}
}

// printUplink says whether the upstream keeps up, and if not, why.
func printUplink(w io.Writer, u *uplink.Status, r *rates) {
	name := " " + u.Name
	if u.Name == defaultUpstream || u.Name == "" {
		name = ""
	}
	fmt.Fprintf(w, "uplink%s: %s to %s: %s in %s sent, %d pending",
		name, u.Format, u.URL, quantity(u.SentReadings, "reading", "readings"), quantity(u.SentBatches, "batch", "batches"), u.PendingReadings)
	if u.OldestPending != nil {
		fmt.Fprintf(w, " (oldest from %s)", u.OldestPending.Format(time.RFC3339))
	}
	fmt.Fprintf(w, ", %s", quantity(u.Retries, "retry", "retries"))
	if r != nil {
		fmt.Fprintf(w, ", now %.0f readings/s", r.sent[u.Name])
	}
	if u.ParkedBatches > 0 {
		fmt.Fprintf(w, ", %s parked", quantity(u.ParkedBatches, "batch", "batches"))
	}
	if u.Skipped > 0 {
		fmt.Fprintf(w, ", %s skipped", quantity(u.Skipped, "reading", "readings"))
	}
	if u.DroppedUnsent > 0 {
		fmt.Fprintf(w, ", %s dropped unsent by the disk cap", quantity(u.DroppedUnsent, "reading", "readings"))
	}
	if u.Refused > 0 {
		fmt.Fprintf(w, ", %s refused by the broker", quantity(u.Refused, "message", "messages"))
	}
	fmt.Fprintln(w)
	if u.LastSuccess != nil {
		fmt.Fprintf(w, "        last success %s\n", u.LastSuccess.Format(time.RFC3339))
	}
	if u.Failing() {
		fmt.Fprintf(w, "        last error %s: %s\n", u.LastErrorAt.Format(time.RFC3339), u.LastError)
		if u.NextAttempt != nil {
			fmt.Fprintf(w, "        next attempt %s\n", u.NextAttempt.Format(time.RFC3339))
		}
	}
}

// quantity writes n and the noun for n things: "1 client", "2 clients".
func quantity[N int64 | uint64](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, dashboard.Plural(n, one, many))
}

// size formats a byte count for people.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
