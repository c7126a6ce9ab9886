package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// The file systems the full-disk tests run on: tmpfs, and ext4 on a loop
// device, so that what they prove does not hang on tmpfs behaviour.
var fullDiskKinds = []string{"tmpfs", "ext4"}

// bulkPublisher publishes messages of many readings each with strictly
// increasing times, so that a disk fills soon, and records which got their
// PUBACK. Message i carries seq = i and fields f00…f29.
type bulkPublisher struct {
	mu    sync.Mutex // guards acked
	acked map[int]bool
	sent  int // messages published; used by run's goroutine only
}

const bulkFields = 30

// bulkT0 is the time of message 0, in milliseconds.
var bulkT0 = time.Now().Add(-2 * time.Hour).UnixMilli()

func bulkDevice(i int) string { return fmt.Sprintf("bulk-%d", i%16) }

func bulkPayload(i int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 1))
	var b strings.Builder
	fmt.Fprintf(&b, `{"ts":%d,"seq":%d`, bulkT0+int64(i), i)
	for f := range bulkFields {
		fmt.Fprintf(&b, `,"f%02d":%v`, f, rng.Float64())
	}
	b.WriteString("}")
	return b.String()
}

// run publishes new messages, window in flight, until stop is closed or
// the connection is lost, and waits up to ackTimeout for the PUBACKs of
// those in flight.
func (p *bulkPublisher) run(addr, id string, window int, stop <-chan struct{}) error {
	w, err := testkit.ConnectWindow(addr, id, window, startTimeout, ackTimeout)
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		i := p.sent
		err := w.Publish("sensors/"+bulkDevice(i)+"/telemetry", bulkPayload(i), stop, func() {
			p.mu.Lock()
			p.acked[i] = true
			p.mu.Unlock()
		})
		if errors.Is(err, errStopped) {
			return nil
		}
		if err != nil {
			return err
		}
		p.sent++
	}
}

func (p *bulkPublisher) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// check opens the stopped gateway's data directory and checks that every
// acknowledged message is stored whole, and returns how many were.
func (p *bulkPublisher) check(t *testing.T, dataDir string) int {
	t.Helper()
	type key struct {
		device, metric string
		ms             int64
	}
	all, counted := storedReadings(t, dataDir)
	stored := make(map[key]float64, len(all))
	for _, r := range all {
		stored[key{r.Device, r.Metric, r.TS / 1e6}] = r.Value
	}
	if counted != uint64(len(stored)) {
		t.Errorf("the store counts %d readings and holds %d", counted, len(stored))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	missing := 0
	for i := range p.acked {
		ms := bulkT0 + int64(i)
		if v, ok := stored[key{bulkDevice(i), "seq", ms}]; !ok || v != float64(i) {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged message %d is not stored (seq: %v, %v)", i, v, ok)
			}
			continue
		}
		for f := range bulkFields {
			if _, ok := stored[key{bulkDevice(i), fmt.Sprintf("f%02d", f), ms}]; !ok {
				t.Errorf("acknowledged message %d: field f%02d is not stored", i, f)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged messages are not stored", missing, len(p.acked))
	}
	return len(p.acked)
}

// pauseDoc is the part of the status the full-disk tests read.
type pauseDoc struct {
	Ingest struct {
		Stored       uint64 `json:"stored"`
		Failed       uint64 `json:"failed"`
		Paused       bool   `json:"paused"`
		PausedReason string `json:"paused_reason"`
	} `json:"ingest"`
	Store struct {
		DiskBytes        int64    `json:"disk_bytes"`
		DiskFreeBytes    int64    `json:"disk_free_bytes"`
		DiskReserveBytes int64    `json:"disk_reserve_bytes"`
		ReserveFileBytes int64    `json:"reserve_file_bytes"`
		ForeignBytes     int64    `json:"foreign_bytes"`
		ForeignFiles     []string `json:"foreign_files"`
	} `json:"store"`
}

// checkPaused checks that the gateway says it is paused for want of space:
// the status, /readyz, /metrics and `cairn status`.
func checkPaused(t *testing.T, bin string, p *cairnProcess, api *apiClient) {
	t.Helper()
	st := statusAs[pauseDoc](t, api)
	if !st.Ingest.Paused || !strings.Contains(st.Ingest.PausedReason, "less than the reserve") {
		t.Errorf("status: paused %v (%q), want paused for the reserve", st.Ingest.Paused, st.Ingest.PausedReason)
	}
	// Paused below the reserve, ingest resumes only once an eighth more
	// is free (1 MiB at least): a compaction that ends meanwhile gives
	// space back without resuming it.
	resume := st.Store.DiskReserveBytes + max(st.Store.DiskReserveBytes/8, 1<<20)
	if st.Store.DiskReserveBytes <= 0 || st.Store.DiskFreeBytes >= resume {
		t.Errorf("status: %d bytes free, reserve %d; want less free than the reserve and an eighth, %d", st.Store.DiskFreeBytes, st.Store.DiskReserveBytes, resume)
	}
	code, body, err := api.fetch("/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(body), "ingest paused: the file system") {
		t.Errorf("GET /readyz: %d %q (%v), want 503 with the reason", code, body, err)
	}
	_, body, err = api.fetch("/metrics")
	if err != nil || !strings.Contains(string(body), "\ncairn_ingest_paused 1\n") || !strings.Contains(string(body), "\ncairn_store_disk_free_bytes ") {
		t.Errorf("GET /metrics: %v; want cairn_ingest_paused 1 and the free space", err)
	}
	out, err := exec.Command(bin, "status", "-url", "http://"+p.http).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PAUSED: messages are not acknowledged") || !strings.Contains(string(out), "free on its file system") {
		t.Errorf("cairn status: %v\n%s", err, out)
	}
	if !strings.Contains(p.out.String(), `level=WARN msg="ingest paused: the file system is nearly full`) {
		t.Errorf("no warning that ingest paused in the log:\n%s", p.out)
	}
}

// waitResumed waits until the gateway takes messages again, and checks
// that it says so.
func waitResumed(t *testing.T, p *cairnProcess, api *apiClient) {
	t.Helper()
	waitUntil(t, 15*time.Second, "ingest to resume once space is freed", func() (bool, string) {
		st := statusAs[pauseDoc](t, api)
		return !st.Ingest.Paused, fmt.Sprintf("paused: %q, %d bytes free", st.Ingest.PausedReason, st.Store.DiskFreeBytes)
	})
	if code, body, err := api.fetch("/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /readyz after resuming: %d %q (%v)", code, body, err)
	}
	if _, err := p.out.WaitLine(`msg="ingest resumed: the file system has room again"`, p.Exited(), 5*time.Second); err != nil {
		t.Errorf("no line saying ingest resumed: %v\n%s", err, p.out)
	}
}

// publishFor publishes until n more messages are acknowledged, or fails
// the test after timeout.
func (p *bulkPublisher) publishFor(t *testing.T, addr, id string, n int, timeout time.Duration) {
	t.Helper()
	want := p.ackedCount() + n
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- p.run(addr, id, 50, stop) }()
	waitUntil(t, timeout, fmt.Sprintf("%d more PUBACKs", n), func() (bool, string) {
		got := p.ackedCount()
		return got >= want, fmt.Sprintf("%d of %d acknowledged", got, want)
	})
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("publisher: %v", err)
	}
}

const fullDiskConfig = localConfig + `store:
retention:
  max_disk_bytes: %CAP%
uplink:
  url: http://127.0.0.1:%PORT%/write
  retry_wait_min: 1s
  retry_wait_max: 2s
`

// fullDiskSize is the size of the file systems the tests fill.
const fullDiskSize = 160 << 20

// TestFullDisk_CairnFillsItsFileSystem lets cairn fill its file system
// itself, with no disk cap and the upstream down: PUBACKs must stop
// before the disk is full, the gateway must say why and stay up, every
// acknowledged reading must be stored, and ingest must resume by itself
// once space is freed.
func TestFullDisk_CairnFillsItsFileSystem(t *testing.T) {
	for _, kind := range fullDiskKinds {
		t.Run(kind, func(t *testing.T) {
			bin := cairnBinary.get(t)
			mnt := testkit.MountFS(t, kind, fullDiskSize)
			dataDir := filepath.Join(mnt, "data")
			// What cairn does not fill itself is taken beforehand by a
			// file beside the data directory, so the test is short: the
			// reserve (32 MiB), the reserve file (16 MiB) and 40 MiB are
			// left for cairn.
			filler := filepath.Join(mnt, "filler")
			testkit.Fill(t, filler, 88<<20)
			cfg := strings.NewReplacer("%CAP%", "0", "%PORT%", fmt.Sprint(freePort(t))).Replace(fullDiskConfig)
			p := startCairn(t, bin, writeConfig(t, dataDir, cfg))
			api := newAPIClient(p.http)

			pub := &bulkPublisher{acked: make(map[int]bool)}
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- pub.run(p.mqtt, "filler", 100, stop) }()
			waitUntil(t, 3*time.Minute, "ingest to pause for want of space", func() (bool, string) {
				st := statusAs[pauseDoc](t, api)
				return st.Ingest.Paused, fmt.Sprintf("%d acknowledged, %d bytes free, %d in the store", pub.ackedCount(), st.Store.DiskFreeBytes, st.Store.DiskBytes)
			})
			// PUBACKs stop: none for two seconds in a row.
			last := pub.ackedCount()
			waitUntil(t, 30*time.Second, "PUBACKs to stop", func() (bool, string) {
				time.Sleep(2 * time.Second)
				n := pub.ackedCount()
				stopped := n == last
				last = n
				return stopped, fmt.Sprintf("%d acknowledged", n)
			})
			checkPaused(t, bin, p, api)
			if free := testkit.FreeBytes(t, mnt); free <= 0 {
				t.Errorf("the file system filled up: %d bytes free", free)
			}
			if !p.Running() {
				t.Fatalf("cairn exited:\n%s", p.out)
			}
			t.Logf("%s: paused after %d messages acknowledged, %d bytes free", kind, pub.ackedCount(), testkit.FreeBytes(t, mnt))

			// Space comes back: ingest resumes without a restart, and what
			// was held is acknowledged.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			waitResumed(t, p, api)
			close(stop)
			if err := <-done; err != nil {
				t.Fatalf("publisher: %v", err)
			}
			pub.publishFor(t, p.mqtt, "after", 200, time.Minute)
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
			}
			if strings.Contains(p.out.String(), "SIGBUS") || strings.Contains(p.out.String(), "panic") {
				t.Errorf("cairn faulted:\n%s", p.out)
			}
			n := pub.check(t, dataDir)
			t.Logf("%s: %d acknowledged messages stored", kind, n)
		})
	}
}

// TestFullDisk_ForeignFileAndRestart fills the file system with a file
// in the data directory that is not cairn's, under the automatic disk
// cap. cairn must pause, report the file and keep it; restarted while the
// disk is still full it must open and answer queries within 5 s; once the
// file is removed, ingest resumes by itself, and no acknowledged reading
// is lost.
func TestFullDisk_ForeignFileAndRestart(t *testing.T) {
	for _, kind := range fullDiskKinds {
		t.Run(kind, func(t *testing.T) {
			bin := cairnBinary.get(t)
			mnt := testkit.MountFS(t, kind, fullDiskSize)
			dataDir := filepath.Join(mnt, "data")
			cfg := writeConfig(t, dataDir, strings.NewReplacer("%CAP%", "auto", "%PORT%", fmt.Sprint(freePort(t))).Replace(fullDiskConfig))
			p := startCairn(t, bin, cfg)
			t.Cleanup(func() {
				if t.Failed() {
					out, _ := exec.Command("sh", "-c", "df "+mnt+"; ls -las "+dataDir).CombinedOutput()
					t.Logf("cairn's output:\n%s\n%s", p.out, out)
				}
			})
			api := newAPIClient(p.http)
			pub := &bulkPublisher{acked: make(map[int]bool)}
			pub.publishFor(t, p.mqtt, "first", 2000, time.Minute)
			if !p.Running() {
				t.Fatalf("cairn exited:\n%s", p.out)
			}
			waitUntil(t, 10*time.Second, "the reserve file", func() (bool, string) {
				st := statusAs[pauseDoc](t, api)
				return st.Store.ReserveFileBytes > 0, "no reserve file yet"
			})

			// Something else fills the disk while sensors keep sending.
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- pub.run(p.mqtt, "during", 50, stop) }()
			foreign := filepath.Join(dataDir, "camera.mp4")
			testkit.Fill(t, foreign, 0)
			waitUntil(t, 15*time.Second, "ingest to pause for want of space", func() (bool, string) {
				st := statusAs[pauseDoc](t, api)
				return st.Ingest.Paused, fmt.Sprintf("%d bytes free", st.Store.DiskFreeBytes)
			})
			time.Sleep(2 * time.Second) // a while on the full disk
			close(stop)
			<-done // the connection may have been closed for a commit that failed
			checkPaused(t, bin, p, api)
			st := statusAs[pauseDoc](t, api)
			if st.Store.ForeignBytes < 64<<20 || len(st.Store.ForeignFiles) != 1 || st.Store.ForeignFiles[0] != "camera.mp4" {
				t.Errorf("status: foreign %d bytes in %q; want camera.mp4", st.Store.ForeignBytes, st.Store.ForeignFiles)
			}
			if !strings.Contains(p.out.String(), "files in the data directory that are not cairn's") {
				t.Errorf("the foreign file was not logged:\n%s", p.out)
			}
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn after SIGTERM on a full disk: %v\n%s", err, p.out)
			}

			// Started again on the full disk: it opens and answers.
			started := time.Now()
			p = startCairn(t, bin, cfg)
			api = newAPIClient(p.http)
			var readings struct {
				Readings []readingDoc `json:"readings"`
			}
			if code := api.get(t, "/v1/devices/"+bulkDevice(0)+"/readings?metric=seq&limit=5", &readings); code != http.StatusOK || len(readings.Readings) == 0 {
				t.Fatalf("readings after a restart on a full disk: %d, %d readings", code, len(readings.Readings))
			}
			ready := time.Since(started)
			if ready > 5*time.Second {
				t.Errorf("ready for queries %s after the start on a full disk, want within 5s", ready)
			}
			t.Logf("%s: restarted on a full disk (%d bytes free), answering queries after %s", kind, testkit.FreeBytes(t, mnt), ready.Round(time.Millisecond))
			waitUntil(t, 10*time.Second, "the status to say ingest is paused", func() (bool, string) {
				st := statusAs[pauseDoc](t, api)
				return st.Ingest.Paused, "not paused"
			})
			checkPaused(t, bin, p, api)
			if _, err := os.Stat(foreign); err != nil {
				t.Errorf("the foreign file: %v", err)
			}

			if err := os.Remove(foreign); err != nil {
				t.Fatal(err)
			}
			waitResumed(t, p, api)
			pub.publishFor(t, p.mqtt, "after", 500, time.Minute)
			waitUntil(t, 10*time.Second, "the reserve file to be made again", func() (bool, string) {
				st := statusAs[pauseDoc](t, api)
				return st.Store.ReserveFileBytes > 0, "no reserve file"
			})
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
			}
			n := pub.check(t, dataDir)
			t.Logf("%s: %d acknowledged messages stored", kind, n)
		})
	}
}

// TestFullDisk_FirstStartWaitsForSpace starts cairn on a file system that
// is full before it ever made its reserve file: the store cannot open.
// cairn must wait for space, not exit into a restart loop, and start once
// there is room.
func TestFullDisk_FirstStartWaitsForSpace(t *testing.T) {
	bin := cairnBinary.get(t)
	mnt := testkit.MountFS(t, "tmpfs", 64<<20)
	dataDir := filepath.Join(mnt, "data")
	cfg := writeConfig(t, dataDir, strings.NewReplacer("%CAP%", "64MiB", "%PORT%", fmt.Sprint(freePort(t))).Replace(fullDiskConfig))
	// A first start makes the store; then the reserve file goes, as
	// though it had never been made, and the disk fills.
	p := startCairn(t, bin, cfg)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
	if err := os.Remove(filepath.Join(dataDir, "reserve")); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	testkit.Fill(t, filler, 0)

	w := startProcess(t, bin, "run", "-config", cfg)
	if _, err := w.out.WaitLine("the store cannot open: its file system is full; waiting for free space", w.Exited(), startTimeout); err != nil {
		t.Fatalf("cairn on a full disk: %v (exited: %v)\n%s", err, !w.Running(), w.out)
	}
	time.Sleep(6 * time.Second) // a retry or more
	if !w.Running() {
		t.Fatalf("cairn exited while waiting for space:\n%s", w.out)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := w.out.WaitLine(`msg="cairn started"`, w.Exited(), 15*time.Second); err != nil {
		t.Fatalf("cairn did not start once space was freed: %v\n%s", err, w.out)
	}
	if err := w.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, w.out)
	}
}
