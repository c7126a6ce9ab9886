package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// limitDoc is the part of the status the shared-disk test reads.
type limitDoc struct {
	pauseDoc
	Retention struct {
		RemovedReadings       uint64 `json:"removed_readings"`
		DroppedUnsent         uint64 `json:"dropped_unsent"`
		MaxDiskBytes          int64  `json:"max_disk_bytes"`
		EffectiveMaxDiskBytes int64  `json:"effective_max_disk_bytes"`
		DiskLimit             string `json:"disk_limit"`
	} `json:"retention"`
}

func (d limitDoc) String() string {
	return fmt.Sprintf("limit %q (%d of %d, cap %d), %d bytes free (reserve %d), paused %v, %d removed, %d dropped unsent",
		d.Retention.DiskLimit, d.Store.DiskBytes, d.Retention.EffectiveMaxDiskBytes, d.Retention.MaxDiskBytes,
		d.Store.DiskFreeBytes, d.Store.DiskReserveBytes, d.Ingest.Paused, d.Retention.RemovedReadings, d.Retention.DroppedUnsent)
}

// sharedDiskSize is the size of the file system the shared-disk test
// runs on: the automatic cap (70% of it) fits beside the reserve and the
// reserve file, so the cap binds while cairn is alone there.
const sharedDiskSize = 256 << 20

// TestFullDisk_ForeignFileGrowsAndShrinks runs cairn under the automatic
// disk cap on a file system it shares with a file that grows until less
// than the reserve is free, then shrinks. While cairn is alone, the cap
// binds and nothing is deleted. Once the file leaves less than the
// reserve free, the cap in force becomes what the file system leaves
// beside the reserve: cairn deletes its oldest data (never the newest
// keep_recent, nor what is not sent yet), the status names the limit,
// and messages are
// acknowledged again without a restart. Once the file shrinks, the cap
// binds again and nothing more is deleted.
func TestFullDisk_ForeignFileGrowsAndShrinks(t *testing.T) {
	for _, kind := range fullDiskKinds {
		t.Run(kind, func(t *testing.T) {
			bin := cairnBinary.get(t)
			mnt := testkit.MountFS(t, kind, sharedDiskSize)
			dataDir := filepath.Join(mnt, "data")
			// The bulk publisher's readings span a few minutes: all but the
			// newest 5 s of each series may go.
			cfg := strings.NewReplacer("%CAP%", "auto", "%PORT%", fmt.Sprint(freePort(t)),
				"retention:\n", "retention:\n  keep_recent: 5s\n").Replace(fullDiskConfig)
			p := startCairn(t, bin, writeConfig(t, dataDir, cfg))
			t.Cleanup(func() {
				if t.Failed() {
					out, _ := exec.Command("sh", "-c", "df "+mnt+"; ls -las "+dataDir).CombinedOutput()
					t.Logf("cairn's output:\n%s\n%s", p.out, out)
				}
			})
			api := newAPIClient(p.http)
			status := func() limitDoc { return statusAs[limitDoc](t, api) }

			// Alone on its file system: the cap binds, nothing goes.
			pub := &bulkPublisher{acked: make(map[int]bool)}
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- pub.run(p.mqtt, "fill", 100, stop) }()
			waitUntil(t, 3*time.Minute, "the store to hold 40 MiB", func() (bool, string) {
				st := status()
				return st.Store.DiskBytes >= 40<<20, st.String()
			})
			close(stop)
			if err := <-done; err != nil {
				t.Fatalf("publisher: %v", err)
			}
			waitUntil(t, 10*time.Second, "the reserve file and the cap's check", func() (bool, string) {
				st := status()
				return st.Store.ReserveFileBytes > 0 && st.Retention.DiskLimit != "", st.String()
			})
			// The store compacts what the publisher wrote for a while after:
			// its files shrink by themselves, on ext4 by a fifth. Wait until
			// they hold still, so that the room the foreign file takes must
			// come from deletes.
			var still int64
			since := time.Now()
			waitUntil(t, time.Minute, "cairn's files to hold still for 5 s", func() (bool, string) {
				st := status()
				if d := st.Store.DiskBytes - still; d > 64<<10 || d < -64<<10 {
					still, since = st.Store.DiskBytes, time.Now()
				}
				return time.Since(since) >= 5*time.Second, st.String()
			})
			alone := status()
			if alone.Retention.DiskLimit != "max_disk_bytes" || alone.Retention.EffectiveMaxDiskBytes != alone.Retention.MaxDiskBytes ||
				alone.Retention.RemovedReadings != 0 || alone.Retention.DroppedUnsent != 0 || alone.Ingest.Paused {
				t.Errorf("alone on the file system: %s; want the cap binding, nothing removed, not paused", alone)
			}
			t.Logf("%s: alone: %s", kind, alone)

			// A file grows beside the data directory until less than the
			// reserve is free, by 1 MiB: cairn must give back that and the
			// resume margin (4 MiB). What it cannot give back, the unsent
			// readings of its log (the upstream is down) and the
			// aggregates, is most of its files: leaving 4 MiB less free
			// had it shed 8.4 of its 43 MB, which left under 1 MB to spare
			// in some runs and too little in others.
			foreign := filepath.Join(mnt, "backup.tar")
			testkit.Fill(t, foreign, alone.Store.DiskReserveBytes-1<<20)
			waitUntil(t, 10*time.Second, "the status to name the free space or the reserve", func() (bool, string) {
				st := status()
				return st.Retention.DiskLimit == "reserve" || st.Retention.DiskLimit == "free_space", st.String()
			})
			// The oldest data goes, ingest resumes without a restart and
			// messages are acknowledged again.
			pub.publishFor(t, p.mqtt, "crowded", 500, 2*time.Minute)
			waitUntil(t, 10*time.Second, "the status to name the free space", func() (bool, string) {
				st := status()
				return st.Retention.DiskLimit == "free_space", st.String()
			})
			crowded := status()
			t.Logf("%s: with %d MiB of foreign file: %s", kind, fileBytes(t, foreign)>>20, crowded)
			if crowded.Retention.RemovedReadings == 0 {
				t.Errorf("nothing removed to make room beside the foreign file: %s", crowded)
			}
			// Readings not yet sent go for the cap alone, not for other
			// files (the upstream is down: the outbox holds them all).
			if crowded.Retention.DroppedUnsent != 0 {
				t.Errorf("unsent readings dropped to make room beside the foreign file: %s", crowded)
			}
			if crowded.Store.DiskFreeBytes < crowded.Store.DiskReserveBytes {
				t.Errorf("%d bytes free, less than the reserve %d, while messages are acknowledged", crowded.Store.DiskFreeBytes, crowded.Store.DiskReserveBytes)
			}
			if !strings.Contains(p.out.String(), `limit=free_space`) && !strings.Contains(p.out.String(), `limit=reserve`) {
				t.Errorf("the log does not say the free space limits the store")
			}
			out, err := exec.Command(bin, "status", "-url", "http://"+p.http).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "limit: the file system's free space") {
				t.Errorf("cairn status with the foreign file: %v\n%s", err, out)
			}
			_, page, err := api.fetch("/?part=health")
			if err != nil || !strings.Contains(string(page), "Limit: the free space") {
				t.Errorf("the dashboard's store card does not name the free space: %v\n%s", err, page)
			}

			// The file shrinks, then goes: the cap binds again, and
			// nothing more is deleted.
			if err := os.Truncate(foreign, 4<<20); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 10*time.Second, "the cap to bind again", func() (bool, string) {
				st := status()
				return st.Retention.DiskLimit == "max_disk_bytes", st.String()
			})
			if err := os.Remove(foreign); err != nil {
				t.Fatal(err)
			}
			before := status()
			pub.publishFor(t, p.mqtt, "roomy", 500, time.Minute)
			after := status()
			if after.Retention.DiskLimit != "max_disk_bytes" || after.Retention.RemovedReadings != before.Retention.RemovedReadings ||
				after.Retention.DroppedUnsent != before.Retention.DroppedUnsent || after.Ingest.Paused {
				t.Errorf("with the foreign file gone: %s; before %s: want the cap binding and nothing more removed", after, before)
			}
			out, err = exec.Command(bin, "status", "-url", "http://"+p.http).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "limit: the disk cap") {
				t.Errorf("cairn status without the foreign file: %v\n%s", err, out)
			}
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
			}
		})
	}
}

// fileBytes returns the size of the file at path.
func fileBytes(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}
