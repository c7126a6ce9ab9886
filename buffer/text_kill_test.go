package buffer

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// textKillChildEnv makes the test binary run a writer of
// TestText_SIGKILLedWriterLosesAndDoublesNothing in a process of its own,
// which the test kills.
const textKillChildEnv = "CAIRN_TEXT_KILL_CHILD"

const (
	killRounds       = 6
	killBatches      = 40 // per round
	killSeriesStates = 50 // distinct texts of the "status" series, below MaxStates
)

// killBatch returns batch b of round r: numbers, states that change now
// and then, a series whose texts keep growing its dictionary, and button
// events, some two at one time with different texts.
func killBatch(r, b int) []Reading {
	base := int64(1795132800)*1e9 + int64(r*1000+b)*1e9
	modes := []string{"heat", "cool", "off", "auto", "eco", "fan"}
	events := []string{"single", "double", "hold", "long_push"}
	var rs []Reading
	for i := range 6 {
		ts := base + int64(i)*1e6
		k := r*killBatches + b
		for d := range 2 {
			dev := fmt.Sprintf("th-%d", d)
			rs = append(rs,
				Reading{Device: dev, Metric: "temperature", TS: ts, Value: float64((k*7+i+d)%300) / 10},
				textOf(dev, "mode", ts, modes[(k/5+d)%len(modes)]),
			)
		}
		rs = append(rs, textOf("plc", "status", ts, "s"+strconv.Itoa((k*6+i)%killSeriesStates)))
		if (k+i)%3 == 0 {
			rs = append(rs, textOf("btn", "action", ts, events[(k+i)%len(events)]))
			if (k+i)%2 == 0 { // a burst: another press at the same time
				rs = append(rs, textOf("btn", "action", ts, events[(k+i+1)%len(events)]))
			}
		}
	}
	return rs
}

// killDevices are the devices killBatch writes.
var killDevices = []string{"btn", "plc", "th-0", "th-1"}

// killTextSeries are the text series killBatch writes: device, metric.
var killTextSeries = [][2]string{{"btn", "action"}, {"plc", "status"}, {"th-0", "mode"}, {"th-1", "mode"}}

// TestText_SIGKILLedWriterLosesAndDoublesNothing kills, again and again,
// a process that writes text and number readings through a Writer
// (sealing small buckets, checkpointing often), at a random moment after
// a random number of acknowledged batches; each run first writes again
// every batch of the runs before, as sensors resend what was not
// acknowledged. Every acknowledged reading, text included, must be stored
// once, and the log (of an upstream that never sent) must hold each
// stored reading once, with its text.
func TestText_SIGKILLedWriterLosesAndDoublesNothing(t *testing.T) {
	if spec := os.Getenv(textKillChildEnv); spec != "" {
		textKillChild(t, spec)
		return
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 35))
	acked := make(map[[2]int]bool)
	for r := range killRounds {
		after := 1 + rng.IntN(killBatches)
		cmd := exec.Command(os.Args[0], "-test.run=^TestText_SIGKILLedWriterLosesAndDoublesNothing$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", textKillChildEnv, dir, r))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		n := 0
		deadline := time.After(2 * time.Minute)
	read:
		for n < after {
			select {
			case line, ok := <-lines:
				if !ok {
					break read
				}
				var rr, b int
				if _, err := fmt.Sscanf(line, "ACKED %d %d", &rr, &b); err == nil {
					acked[[2]int{rr, b}] = true
					n++
				}
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("round %d: %d batches acknowledged in 2 minutes", r, n)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for line := range lines { // acknowledged before the kill took
			var rr, b int
			if _, err := fmt.Sscanf(line, "ACKED %d %d", &rr, &b); err == nil {
				acked[[2]int{rr, b}] = true
			}
		}
		cmd.Wait()
		if n < after {
			t.Fatalf("round %d: the writer ended after %d batches, before the kill", r, n)
		}
		t.Logf("round %d: killed after %d batches acknowledged", r, n)
	}

	s, w := testStoreWith(t, dir, WriterOptions{BucketSamples: 16})
	stored := make(map[string]int)
	for _, dev := range killDevices {
		got, err := s.Readings(all(dev))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			stored[readingKey(r)]++
		}
	}
	lost, doubled, texts := 0, 0, 0
	for k := range acked {
		for _, r := range killBatch(k[0], k[1]) {
			if r.Text != "" {
				texts++
			}
			switch stored[readingKey(r)] {
			case 0:
				lost++
			case 1:
			default:
				doubled++
			}
		}
	}
	for k, n := range stored {
		if n > 1 {
			t.Errorf("stored %d times: %s", n, k)
			doubled++
		}
	}
	if lost+doubled > 0 {
		t.Fatalf("of %d batches acknowledged: %d readings lost, %d doubled", len(acked), lost, doubled)
	}
	t.Logf("%d batches acknowledged (%d text readings among them), all stored once; %d readings stored", len(acked), texts, len(stored))
	if n := s.ReadingCount(); n != uint64(len(stored)) {
		t.Errorf("reading count %d, want %d", n, len(stored))
	}
	// The aggregates of the text series are those of their readings.
	for _, sr := range killTextSeries {
		checkStatesRecords(t, "after the kills", s, sr[0], sr[1])
	}
	// The log holds every stored reading once, texts included.
	inLog := make(map[string]int)
	for _, r := range readOutbox(t, s) {
		inLog[readingKey(r.Reading)]++
	}
	for k, n := range inLog {
		if n != 1 || stored[k] != 1 {
			t.Errorf("the log holds %d of %s, stored %d times", n, k, stored[k])
		}
	}
	if len(inLog) != len(stored) {
		t.Errorf("the log holds %d readings, the store %d", len(inLog), len(stored))
	}
	// Everything once more: nothing new, the dictionary as it was.
	dict := s.Texts("plc", "status")
	for r := range killRounds {
		for b := range killBatches {
			res := write(t, w, killBatch(r, b)...)
			if res.WrongKind+res.TooManyStates+res.Refused > 0 {
				t.Fatalf("batch %d %d again: %+v", r, b, res)
			}
		}
	}
	if got := s.Texts("plc", "status"); len(got) != killSeriesStates || !strings.HasPrefix(strings.Join(got, ","), strings.Join(dict, ",")) {
		t.Errorf("dictionary after writing everything: %q; before %q", got, dict)
	}
}

// textKillChild writes the batches of the runs before spec's round and
// then its own, printing each acknowledged one, until it is killed.
func textKillChild(t *testing.T, spec string) {
	i := strings.LastIndexByte(spec, ':')
	dir := spec[:i]
	round, err := strconv.Atoi(spec[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cursor("up"); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{BucketSamples: 16, SealCheck: 20 * time.Millisecond, CheckpointInterval: 30 * time.Millisecond})
	go w.Run(context.Background())
	for r := range round + 1 {
		for b := range killBatches {
			res := make(chan Result, 1)
			if err := w.Submit(context.Background(), killBatch(r, b), func(x Result) { res <- x }); err != nil {
				t.Fatal(err)
			}
			x := <-res
			if x.Err != nil || x.WrongKind+x.TooManyStates+x.Refused > 0 {
				t.Fatalf("batch %d %d: %+v", r, b, x)
			}
			if r == round {
				fmt.Fprintf(os.Stdout, "ACKED %d %d\n", r, b)
			}
		}
	}
	select {} // until killed
}

// TestText_CopiedMidWriteKeepsTexts copies the data directory while a
// Writer stores text and number readings (checkpointing and sealing as it
// goes), as a power cut leaves it, several times: each copy opens with
// every reading acknowledged before the copy began, once, with its text,
// the dictionaries as the readings need them, and a new text after the
// reopen takes an id of its own.
func TestText_CopiedMidWriteKeepsTexts(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w := startWriter(t, s, WriterOptions{BucketSamples: 16, SealCheck: 20 * time.Millisecond, CheckpointInterval: 30 * time.Millisecond})
	acked := make(chan [2]int, killRounds*killBatches)
	go func() {
		defer close(acked)
		for r := range killRounds {
			for b := range killBatches {
				res := make(chan Result, 1)
				if err := w.Submit(context.Background(), killBatch(r, b), func(x Result) { res <- x }); err != nil {
					return
				}
				if x := <-res; x.Err == nil && x.Stored > 0 {
					acked <- [2]int{r, b}
				}
			}
		}
	}()
	var done [][2]int
	for copies := 0; copies < 4; copies++ {
		for range 20 + copies*10 {
			k, ok := <-acked
			if !ok {
				t.Fatal("the writer stopped")
			}
			done = append(done, k)
		}
		before := append([][2]int(nil), done...)
		crashed := t.TempDir()
		copyLive(t, crashed, dir)
		func() {
			c, err := Open(Options{Dir: crashed, MemTableSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stored := make(map[string]int)
			for _, dev := range killDevices {
				got, err := c.Readings(all(dev))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range got {
					stored[readingKey(r)]++
				}
			}
			for _, k := range before {
				for _, r := range killBatch(k[0], k[1]) {
					if n := stored[readingKey(r)]; n != 1 {
						t.Fatalf("copy %d: %s stored %d times", copies, readingKey(r), n)
					}
				}
			}
			for k, n := range stored {
				if n != 1 {
					t.Fatalf("copy %d: %s stored %d times", copies, k, n)
				}
			}
			if n := c.ReadingCount(); n != uint64(len(stored)) {
				t.Errorf("copy %d: reading count %d, want %d", copies, n, len(stored))
			}
			for _, sr := range killTextSeries {
				checkStatesRecords(t, fmt.Sprintf("copy %d", copies), c, sr[0], sr[1])
			}
			cw := NewWriter(c, WriterOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			wdone := make(chan error)
			go func() { wdone <- cw.Run(ctx) }()
			defer func() { cancel(); <-wdone }()
			dict := c.Texts("btn", "action")
			res := write(t, cw, textOf("btn", "action", 1, "triple"))
			if got := c.Texts("btn", "action"); res.Stored != 1 || len(got) != len(dict)+1 || got[len(dict)] != "triple" {
				t.Errorf("copy %d: a new text after the reopen: %+v, dictionary %q after %q", copies, res, got, dict)
			}
		}()
		t.Logf("copy %d: %d batches acknowledged before it, each stored once", copies, len(before))
	}
	for range acked {
	}
}
