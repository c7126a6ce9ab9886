// Command soak is scripts/bench.sh soak: a real `cairn run` under a steady
// load for SOAK_DURATION (default 1h), sampled every SOAK_SAMPLE (1m), to
// show that what it holds stays flat.
//
// The load: `cairn sim` with 100 devices at 1 Hz each (QoS 1, two readings
// a message) to cairn's embedded broker; the dashboard (GET / and its
// health, devices and charts parts) fetched every SOAK_POLL (10s); an
// upstream VictoriaMetrics that is stopped for SOAK_OUTAGE (a sixth of the
// run: 10 minutes of an hour) from a third of the run, so that it comes
// back at the half; retention by age (raw_max_age 1h, the shortest cairn
// takes, over readings seeded for the hour before the load) and a disk
// cap (SOAK_CAP, 24MiB, keep_recent 1m) that both act during the run.
//
// Each sample: cairn's VmRSS and VmHWM, go_goroutines, open files, the
// data directory's bytes and cairn's own count of them, the upstream's
// backlog (pending_readings), the mean commit time since the sample
// before, VmRSS's parts (anonymous, files, and of the files the store's
// that Badger maps), and the machine's noise since the sample before:
// the CPU time its hypervisor gave to other guests (steal) and cairn's
// own. At the end it waits for the backlog to go, counts the readings
// in VictoriaMetrics against those the sensors got a PUBACK for, writes
// soak.csv and soak.svg to SOAK_OUT (default $TMPDIR/cairn-soak-TIME), and
// prints one line per series: its least-squares slope over the last half
// of the run, per hour, and whether it is flat by the rule on that line.
// It exits 1 if a reading was lost or a series is not flat.
//
// With SOAK_REPLOT=DIR it runs nothing: it reads DIR/soak.csv, prints the
// series' lines and writes DIR/soak.svg again (the other SOAK_ settings
// must be the run's).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

const (
	devices = 100
	rate    = 100 // messages a second in all: 1 Hz a device
	// pendingNear is "near 0" for the backlog: five seconds of ingest.
	pendingNear = 5 * 2 * rate
	// retryWaitMax is the uplink's longest wait between attempts here
	// (default 5m), so that its return is seen within a minute of the
	// upstream's.
	retryWaitMax = time.Minute
)

type settings struct {
	duration, sample, outage, poll, rawMaxAge time.Duration
	outageAt                                  time.Duration
	capBytes                                  int64
	out, cairn                                string
}

func main() {
	s, err := loadSettings()
	if err == nil {
		err = run(s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	}
}

func envDuration(key string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive duration such as 1h or 90s (got %q)", key, v)
	}
	return d, nil
}

func loadSettings() (*settings, error) {
	var s settings
	var err error
	if s.duration, err = envDuration("SOAK_DURATION", time.Hour); err != nil {
		return nil, err
	}
	if s.sample, err = envDuration("SOAK_SAMPLE", time.Minute); err != nil {
		return nil, err
	}
	if s.outage, err = envDuration("SOAK_OUTAGE", s.duration/6); err != nil {
		return nil, err
	}
	if s.poll, err = envDuration("SOAK_POLL", 10*time.Second); err != nil {
		return nil, err
	}
	s.outageAt = s.duration/2 - s.outage
	if s.outageAt < 0 {
		return nil, fmt.Errorf("SOAK_OUTAGE %s: must be at most half of SOAK_DURATION %s", s.outage, s.duration)
	}
	if s.duration/s.sample < 6 {
		return nil, fmt.Errorf("SOAK_SAMPLE %s: want at least 6 samples in SOAK_DURATION %s", s.sample, s.duration)
	}
	s.rawMaxAge = time.Hour // the shortest cairn takes
	s.capBytes = 24 << 20
	if v := os.Getenv("SOAK_CAP"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSuffix(v, "MiB"), 10, 64)
		if err != nil || !strings.HasSuffix(v, "MiB") || n < 16 {
			return nil, fmt.Errorf("SOAK_CAP: want MiB, at least 16MiB (got %q)", v)
		}
		s.capBytes = n << 20
	}
	s.out = os.Getenv("SOAK_OUT")
	if s.out == "" {
		s.out = filepath.Join(os.TempDir(), "cairn-soak-"+time.Now().UTC().Format("20060102T150405"))
	}
	s.cairn = os.Getenv("BENCH_CAIRN")
	return &s, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "soak: %s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// freePorts returns n free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// proc is a child process on one core, killed if soak dies.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func start(name, core, logFile string, stdout io.Writer, args ...string) (*proc, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", append([]string{"-c", core}, args...)...)
	cmd.Stderr = f
	cmd.Stdout = f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to a minute for the process to exit.
func (p *proc) stop() error {
	if !p.running() {
		return fmt.Errorf("%s had exited already: %v", p.name, p.err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %w", p.name, p.err)
		}
		return nil
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within a minute of SIGTERM", p.name)
	}
}

// waitFor polls cond every 100 ms until it holds, p exits or timeout.
func waitFor(what string, p *proc, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p != nil && !p.running() {
			return fmt.Errorf("%s exited while waiting for %s: %v", p.name, what, p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

var client = &http.Client{Timeout: 30 * time.Second}

func get(u string) ([]byte, error) {
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", u, resp.Status, b)
	}
	return b, nil
}

type vm struct {
	dir, addr string
	p         *proc
	logDir    string
	starts    int
}

func (v *vm) start() error {
	v.starts++
	p, err := start("victoria-metrics", "0", filepath.Join(v.logDir, fmt.Sprintf("vm-%d.log", v.starts)), nil,
		"victoria-metrics", "-storageDataPath="+v.dir, "-httpListenAddr="+v.addr,
		"-retentionPeriod=100y", "-loggerLevel=ERROR", "-search.disableCache")
	if err != nil {
		return err
	}
	v.p = p
	return waitFor("victoria-metrics /health", p, 30*time.Second, func() bool {
		_, err := get("http://" + v.addr + "/health")
		return err == nil
	})
}

// uniqueReadings counts the distinct samples (series and time) VictoriaMetrics
// holds under readings_*, and all samples, duplicates included.
func (v *vm) uniqueReadings() (unique, all int, err error) {
	u := "http://" + v.addr + `/api/v1/export?match[]=%7B__name__%3D~%22readings_.%2B%22%7D&start=0`
	resp, err := client.Get(u)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("export: %s", resp.Status)
	}
	seen := make(map[string]struct{})
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var line struct {
			Metric     map[string]string `json:"metric"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return 0, 0, fmt.Errorf("export: %w", err)
		}
		keys := make([]string, 0, len(line.Metric))
		for k, val := range line.Metric {
			keys = append(keys, k+"="+val)
		}
		slices.Sort(keys)
		series := strings.Join(keys, ",")
		for _, ts := range line.Timestamps {
			seen[series+"@"+strconv.FormatInt(ts, 10)] = struct{}{}
			all++
		}
	}
	return len(seen), all, nil
}

// status is the part of cairn's /v1/status the soak reads.
type status struct {
	Ingest struct {
		Stored uint64 `json:"stored"`
	} `json:"ingest"`
	Store struct {
		DiskBytes int64  `json:"disk_bytes"`
		Pruned    uint64 `json:"readings_pruned"`
	} `json:"store"`
	Uplinks []struct {
		Pending       uint64 `json:"pending_readings"`
		Sent          uint64 `json:"sent_readings"`
		DroppedUnsent uint64 `json:"dropped_unsent"`
	} `json:"uplinks"`
	Retention *struct {
		Removed uint64 `json:"removed_readings"`
	} `json:"retention"`
}

func readStatus(base string) (*status, error) {
	b, err := get(base + "/v1/status")
	if err != nil {
		return nil, err
	}
	var s status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("/v1/status: %w", err)
	}
	if len(s.Uplinks) != 1 {
		return nil, fmt.Errorf("/v1/status: want one upstream, got %d", len(s.Uplinks))
	}
	return &s, nil
}

// metrics returns the unlabelled samples of cairn's /metrics by name.
func metrics(base string) (map[string]float64, error) {
	b, err := get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	m := make(map[string]float64)
	for _, l := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(l, " ")
		if !ok || strings.HasPrefix(l, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			m[name] = f
		}
	}
	return m, nil
}

// statusKiB returns the values of keys (in kB) in /proc/PID/status, read
// at once.
func statusKiB(pid int, keys ...string) ([]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	out := make([]float64, len(keys))
	for i, key := range keys {
		j := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, key+":") })
		if j < 0 {
			return nil, fmt.Errorf("no %s in /proc/%d/status", key, pid)
		}
		if out[i], err = parseKB(strings.TrimPrefix(lines[j], key+":")); err != nil {
			return nil, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
		}
	}
	return out, nil
}

// parseKB parses a value of /proc's "    1234 kB".
func parseKB(v string) (float64, error) {
	return strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
}

// mappedKiB is the resident size of process pid's mappings of files
// under dir, from /proc/PID/smaps.
func mappedKiB(pid int, dir string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var kib float64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "Rss:"); ok {
			if in {
				n, err := parseKB(v)
				if err != nil {
					return 0, fmt.Errorf("/proc/%d/smaps: %q: %w", pid, l, err)
				}
				kib += n
			}
			continue
		}
		// A mapping's first line: address range, perms, offset, device,
		// inode, and its path if it has one. The lines of its fields
		// start with a name and a colon.
		if f := strings.Fields(l); len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && strings.HasPrefix(f[5], dir+"/")
		}
	}
	return kib, sc.Err()
}

// cpuTicks is what /proc/stat says of all CPUs: the ticks spent in
// each state, and those the hypervisor gave to other guests (steal).
type cpuTicks struct{ total, steal float64 }

func readCPUTicks() (cpuTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var c cpuTicks
	// user nice system idle iowait irq softirq steal; guest and
	// guest_nice are in user and nice already.
	for i, v := range f[1:9] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return cpuTicks{}, fmt.Errorf("/proc/stat: %w", err)
		}
		c.total += n
		if i == 7 {
			c.steal = n
		}
	}
	return c, nil
}

// dirBytes is the disk space the files under dir take (allocated
// blocks), but for the reserve file, which stays the same size until
// the disk is full.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if path == filepath.Join(dir, "reserve") {
			return nil
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed meanwhile
				return nil
			}
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	return n, err
}

// sample is one row of soak.csv.
type sample struct {
	t                                          float64 // seconds since the load began
	rssMiB, hwmMiB, goroutines, fds            float64
	dirMiB, storeMiB, pending, commitMS        float64
	commits, stored, pruned, removed, upOK     float64
	dashboardFetches, dashboardFailures, sentR float64
	// The machine's noise since the sample before: the share of all
	// CPUs' time that the hypervisor gave to other guests (steal), and
	// cairn's own CPU time as a share of one core. A commit is CPU work
	// and a sync: on a shared VM its time follows the steal.
	stealPct, cairnCPUPct float64
	// VmRSS in parts: anonymous (heap, stacks), file-backed (the
	// binary's pages and the store's), and of the latter those of the
	// store's files (Badger maps its tables and memtables).
	rssAnonMiB, rssFileMiB, rssStoreMiB float64
}

var csvHeader = csvHeaderOld + ",steal_pct,cairn_cpu_pct,rss_anon_mib,rss_file_mib,rss_store_mib"

// csvHeaderOld is the header of the soak.csv files written before the
// steal and CPU columns; SOAK_REPLOT reads them too.
const csvHeaderOld = "t_s,rss_mib,hwm_mib,goroutines,open_files,data_dir_mib,store_disk_mib,pending_readings,commit_ms,commits,stored_readings,readings_pruned,retention_removed,upstream_up,dashboard_fetches,dashboard_failures,sent_readings"

func (s sample) csv() string {
	v := []float64{s.t, s.rssMiB, s.hwmMiB, s.goroutines, s.fds, s.dirMiB, s.storeMiB, s.pending, s.commitMS,
		s.commits, s.stored, s.pruned, s.removed, s.upOK, s.dashboardFetches, s.dashboardFailures, s.sentR,
		s.stealPct, s.cairnCPUPct, s.rssAnonMiB, s.rssFileMiB, s.rssStoreMiB}
	f := make([]string, len(v))
	for i, x := range v {
		f[i] = strconv.FormatFloat(x, 'f', -1, 64)
		if x != math.Trunc(x) {
			f[i] = strconv.FormatFloat(x, 'f', 3, 64)
		}
	}
	return strings.Join(f, ",")
}

// dashboard fetches the page and its parts every poll until stop closes.
type dashboard struct {
	fetches, failures atomic.Int64
	mu                sync.Mutex
	firstErr          error
}

func (d *dashboard) run(base string, every time.Duration, stop <-chan struct{}) {
	urls := []string{"/", "/?part=health", "/?part=devices", "/?part=charts&device=sim-0000&range=1h"}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, u := range urls {
			d.fetches.Add(1)
			if _, err := get(base + u); err != nil {
				d.failures.Add(1)
				d.mu.Lock()
				if d.firstErr == nil {
					d.firstErr = err
				}
				d.mu.Unlock()
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func run(s *settings) error {
	if dir := os.Getenv("SOAK_REPLOT"); dir != "" {
		samples, err := replot(filepath.Join(dir, "soak.csv"))
		if err != nil {
			return err
		}
		rep := analyse(s, samples)
		for _, r := range rep {
			fmt.Println(r.line)
		}
		fmt.Println(noiseLine(samples))
		return os.WriteFile(filepath.Join(dir, "soak.svg"), []byte(plot(s, samples, rep)), 0o644)
	}
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return err
	}
	if s.cairn == "" {
		s.cairn = filepath.Join(s.out, "cairn")
		logf("building cairn into %s", s.cairn)
		if out, err := exec.Command("go", "build", "-o", s.cairn, "./cmd/cairn").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/cairn: %v\n%s", err, out)
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	mqttAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	httpBase := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	up := &vm{dir: filepath.Join(s.out, "vm"), addr: fmt.Sprintf("127.0.0.1:%d", ports[2]), logDir: s.out}
	dataDir, err := filepath.Abs(filepath.Join(s.out, "data")) // as /proc/PID/smaps names its files
	if err != nil {
		return err
	}
	for _, d := range []string{dataDir, up.dir} {
		if _, err := os.Stat(d); err == nil {
			return fmt.Errorf("%s exists: give SOAK_OUT a new directory", d)
		}
	}
	conf := filepath.Join(s.out, "cairn.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
mqtt:
  embedded:
    listen: "%s"
http:
  listen: "%s"
retention:
  raw_max_age: %dh
  max_disk_bytes: %d
  keep_recent: 1m
uplink:
  url: http://%s/write
  gateway_id: soak
  retry_wait_max: %s
`, dataDir, mqttAddr, strings.TrimPrefix(httpBase, "http://"), int(s.rawMaxAge.Hours()), s.capBytes, up.addr, retryWaitMax)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command(s.cairn, "check-config", "-config", conf).CombinedOutput(); err != nil {
		return fmt.Errorf("cairn check-config %s: %v\n%s", conf, err, out)
	}
	logf("output in %s; %s, a sample every %s, upstream down from %s for %s, raw_max_age %s, max_disk_bytes %d MiB",
		s.out, s.duration, s.sample, s.outageAt, s.outage, s.rawMaxAge, s.capBytes>>20)

	if err := up.start(); err != nil {
		return err
	}
	defer func() {
		if up.p.running() {
			up.p.stop()
		}
	}()
	c, err := start("cairn", "1", filepath.Join(s.out, "cairn.log"), nil, s.cairn, "run", "-config", conf)
	if err != nil {
		return err
	}
	defer func() {
		if c.running() {
			c.cmd.Process.Kill()
		}
	}()
	if err := waitFor("cairn's /v1/status", c, time.Minute, func() bool {
		_, err := readStatus(httpBase)
		return err == nil
	}); err != nil {
		return err
	}

	seeded, err := seed("tcp://"+mqttAddr, time.Now())
	if err != nil {
		return err
	}
	logf("seeded %d messages of the hour before", seeded)

	var simOut bytes.Buffer
	sim, err := start("cairn sim", "0", filepath.Join(s.out, "sim.log"), &simOut, s.cairn, "sim",
		"-broker", "tcp://"+mqttAddr, "-devices", strconv.Itoa(devices), "-rate", strconv.Itoa(rate),
		"-qos", "1", "-duration", s.duration.String(), "-progress", "1m")
	if err != nil {
		return err
	}
	began := time.Now()
	defer func() {
		if sim.running() {
			sim.cmd.Process.Kill()
		}
	}()

	dash := &dashboard{}
	stopDash := make(chan struct{})
	dashDone := make(chan struct{})
	go func() {
		// The first device's charts are there once it has published.
		time.Sleep(2 * time.Second)
		dash.run(httpBase, s.poll, stopDash)
		close(dashDone)
	}()

	csvFile, err := os.Create(filepath.Join(s.out, "soak.csv"))
	if err != nil {
		return err
	}
	defer csvFile.Close()
	fmt.Fprintln(csvFile, csvHeader)

	var samples []sample
	var lastCommits, lastCommitSec float64
	lastTicks, err := readCPUTicks()
	if err != nil {
		return err
	}
	lastCPU, err := testkit.CPUTime(c.pid())
	if err != nil {
		return err
	}
	lastAt := time.Now()
	upDown, upBack := false, false
	takeSample := func() error {
		var x sample
		x.t = time.Since(began).Seconds()
		var err error
		pid := c.pid()
		// VmRSS and its parts at one moment, and the store's mapped
		// pages right after: ownRSS subtracts one from the other.
		mem, err1 := statusKiB(pid, "VmRSS", "VmHWM", "RssAnon", "RssFile")
		mapped, err2 := mappedKiB(pid, dataDir)
		fds, err3 := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		dir, err4 := dirBytes(dataDir)
		st, err5 := readStatus(httpBase)
		m, err6 := metrics(httpBase)
		ticks, err7 := readCPUTicks()
		cpu, err8 := testkit.CPUTime(pid)
		now := time.Now()
		if err = errors.Join(err1, err2, err3, err4, err5, err6, err7, err8); err != nil {
			return err
		}
		x.rssMiB, x.hwmMiB, x.rssAnonMiB, x.rssFileMiB = mem[0]/1024, mem[1]/1024, mem[2]/1024, mem[3]/1024
		x.rssStoreMiB = mapped / 1024
		if d := ticks.total - lastTicks.total; d > 0 {
			x.stealPct = 100 * (ticks.steal - lastTicks.steal) / d
		}
		x.cairnCPUPct = 100 * (cpu - lastCPU).Seconds() / now.Sub(lastAt).Seconds()
		lastTicks, lastCPU, lastAt = ticks, cpu, now
		x.fds, x.dirMiB = float64(len(fds)), float64(dir)/(1<<20)
		x.storeMiB = float64(st.Store.DiskBytes) / (1 << 20)
		x.pending, x.sentR = float64(st.Uplinks[0].Pending), float64(st.Uplinks[0].Sent)
		x.stored, x.pruned = float64(st.Ingest.Stored), float64(st.Store.Pruned)
		if st.Retention != nil {
			x.removed = float64(st.Retention.Removed)
		}
		var ok bool
		if x.goroutines, ok = m["go_goroutines"]; !ok {
			return errors.New("/metrics: no go_goroutines")
		}
		commits, ok1 := m["cairn_store_commits_total"]
		commitSec, ok2 := m["cairn_store_commit_seconds_total"]
		if !ok1 || !ok2 {
			return errors.New("/metrics: no cairn_store_commits_total or cairn_store_commit_seconds_total")
		}
		x.commits = commits
		if commits > lastCommits {
			x.commitMS = (commitSec - lastCommitSec) / (commits - lastCommits) * 1000
		}
		lastCommits, lastCommitSec = commits, commitSec
		if up.p.running() {
			x.upOK = 1
		}
		x.dashboardFetches, x.dashboardFailures = float64(dash.fetches.Load()), float64(dash.failures.Load())
		samples = append(samples, x)
		fmt.Fprintln(csvFile, x.csv())
		logf("t=%4.0fs rss=%.1fMiB (anon %.1f, files %.1f, of which the store's %.1f) hwm=%.1fMiB goroutines=%.0f fds=%.0f dir=%.1fMiB store=%.1fMiB pending=%.0f commit=%.2fms stored=%.0f up=%.0f cpu=%.1f%% steal=%.1f%%",
			x.t, x.rssMiB, x.rssAnonMiB, x.rssFileMiB, x.rssStoreMiB, x.hwmMiB, x.goroutines, x.fds, x.dirMiB, x.storeMiB, x.pending, x.commitMS, x.stored, x.upOK, x.cairnCPUPct, x.stealPct)
		return nil
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	next := time.Duration(0)
	for {
		el := time.Since(began)
		if !c.running() {
			return fmt.Errorf("cairn exited during the run: %v (log %s)", c.err, filepath.Join(s.out, "cairn.log"))
		}
		if !upDown && el >= s.outageAt {
			upDown = true
			logf("stopping the upstream for %s", s.outage)
			if err := up.p.stop(); err != nil {
				return err
			}
		}
		if upDown && !upBack && el >= s.outageAt+s.outage {
			upBack = true
			logf("starting the upstream again")
			if err := up.start(); err != nil {
				return err
			}
		}
		if el >= next {
			if err := takeSample(); err != nil {
				return err
			}
			next += s.sample
		}
		if next > s.duration {
			break
		}
		<-tick.C
	}
	// The last sample is at the end of the load.
	select {
	case <-sim.done:
	case <-time.After(time.Minute):
		return errors.New("cairn sim did not finish within a minute of SOAK_DURATION")
	}
	close(stopDash)
	<-dashDone
	if sim.err != nil {
		return fmt.Errorf("cairn sim: %v (log %s)", sim.err, filepath.Join(s.out, "sim.log"))
	}
	var sum struct {
		Sent, Acked int64
	}
	if err := json.Unmarshal(bytes.TrimSpace(simOut.Bytes()), &sum); err != nil {
		return fmt.Errorf("cairn sim's summary %q: %w", simOut.String(), err)
	}

	// Nothing lost: every reading acknowledged is upstream.
	var st *status
	if err := waitFor("empty backlog", c, 10*time.Minute, func() bool {
		st, err = readStatus(httpBase)
		return err == nil && st.Uplinks[0].Pending == 0
	}); err != nil {
		return err
	}
	acked := 2 * (sum.Acked + seeded)
	var unique, all int
	var vmErr error
	waitFor("every acknowledged reading in VictoriaMetrics", nil, time.Minute, func() bool {
		unique, all, vmErr = up.uniqueReadings()
		return vmErr == nil && int64(unique) >= acked && uint64(unique) >= st.Ingest.Stored
	})
	if vmErr != nil {
		return vmErr
	}
	if err := c.stop(); err != nil {
		return fmt.Errorf("cairn: %w (log %s)", err, filepath.Join(s.out, "cairn.log"))
	}
	if err := up.p.stop(); err != nil {
		return err
	}

	rep := analyse(s, samples)
	if err := os.WriteFile(filepath.Join(s.out, "soak.svg"), []byte(plot(s, samples, rep)), 0o644); err != nil {
		return err
	}
	lost := acked - int64(unique)
	if lost < 0 {
		lost = 0
	}
	fmt.Printf("soak: duration=%s sample=%s outage=%s@%s raw_max_age=%s max_disk_bytes=%dMiB devices=%d rate=%d/s samples=%d out=%s\n",
		s.duration, s.sample, s.outage, s.outageAt, s.rawMaxAge, s.capBytes>>20, devices, rate, len(samples), s.out)
	for _, r := range rep {
		fmt.Println(r.line)
	}
	fmt.Println(noiseLine(samples))
	dashErr := ""
	if dash.firstErr != nil {
		dashErr = fmt.Sprintf(" (first: %v)", dash.firstErr)
	}
	fmt.Printf("soak: dashboard fetches=%d failures=%d%s\n", dash.fetches.Load(), dash.failures.Load(), dashErr)
	fmt.Printf("soak: readings acked=%d stored=%d upstream_unique=%d upstream_samples=%d dropped_unsent=%d retention_removed=%.0f lost=%d\n",
		acked, st.Ingest.Stored, unique, all, st.Uplinks[0].DroppedUnsent, samples[len(samples)-1].removed, lost)
	ageRuns, capSteps, peak, err := retentionActs(filepath.Join(s.out, "cairn.log"))
	if err != nil {
		return err
	}
	fmt.Printf("soak: retention by_age_runs=%d disk_cap_steps=%d removed_readings=%.0f disk_peak_logged_mib=%.1f (runs that removed readings, the cap's deletions and the largest disk_bytes its lines give, in cairn.log)\n",
		ageRuns, capSteps, samples[len(samples)-1].removed, float64(peak)/(1<<20))
	flat := true
	for _, r := range rep {
		flat = flat && r.flat
	}
	verdict := "yes"
	if !flat {
		verdict = "no"
	}
	fmt.Printf("soak: flat=%s lost=%d csv=%s svg=%s\n", verdict, lost,
		filepath.Join(s.out, "soak.csv"), filepath.Join(s.out, "soak.svg"))
	switch {
	case lost > 0:
		return fmt.Errorf("%d acknowledged readings are not upstream", lost)
	case st.Uplinks[0].DroppedUnsent > 0:
		return fmt.Errorf("the disk cap dropped %d unsent readings: raise SOAK_CAP", st.Uplinks[0].DroppedUnsent)
	case dash.failures.Load() > 0:
		return fmt.Errorf("%d dashboard fetches failed%s", dash.failures.Load(), dashErr)
	case !flat:
		return errors.New("not flat")
	}
	return nil
}

// retentionActs counts in cairn's log the runs of retention by age that
// removed readings and the disk cap's deletions, and gives the largest
// disk_bytes the disk cap's lines give: what it measured when it acted,
// between the samples.
func retentionActs(logFile string) (ageRuns, capSteps int, peak int64, err error) {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(l, `msg="retention removed old readings"`):
			ageRuns++
		case strings.Contains(l, `msg="disk cap: deleted`), strings.Contains(l, `msg="disk cap: dropped`):
			capSteps++
		}
		if _, v, ok := strings.Cut(l, " disk_bytes="); ok {
			v, _, _ = strings.Cut(v, " ")
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				peak = max(peak, n)
			}
		}
	}
	return ageRuns, capSteps, peak, nil
}
