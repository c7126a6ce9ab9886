package buffer

import (
	"context"
	"strings"
)

// PauseCause names a reason for the Writer to take no new batches. Each
// cause is set and cleared by the one component that watches it; the
// Writer takes batches again once no cause holds.
type PauseCause int

const (
	// PauseDiskCap: the data directory is at the disk cap's full mark
	// (Retention).
	PauseDiskCap PauseCause = iota
	// PauseDiskFree: the file system holding the data directory has less
	// free space than the reserve (Headroom).
	PauseDiskFree

	numPauseCauses
)

// setPause has the running Writer stop taking new batches for cause,
// reason saying why, or take them again as far as cause goes (reason "").
// While paused, submitted batches wait in the queue and Submit blocks
// once it is full: their messages are not acknowledged, so publishers
// hold them (or the broker redelivers them). Steps (checkpoints,
// sealing, retention) still run.
func (w *Writer) setPause(ctx context.Context, cause PauseCause, reason string) error {
	return w.do(ctx, func() error {
		w.pauses[cause] = reason
		var why []string
		for _, r := range w.pauses {
			if r != "" {
				why = append(why, r)
			}
		}
		if len(why) == 0 {
			w.pausedWhy.Store(nil)
		} else {
			s := strings.Join(why, "; ")
			w.pausedWhy.Store(&s)
		}
		return nil
	})
}

// paused reports whether the Writer takes no new batches. Run goroutine
// only.
func (w *Writer) paused() bool {
	for _, r := range w.pauses {
		if r != "" {
			return true
		}
	}
	return false
}

// PausedReason says why the Writer takes no new batches (the disk cap, or
// too little free space), or "" while it takes them.
func (w *Writer) PausedReason() string {
	if p := w.pausedWhy.Load(); p != nil {
		return *p
	}
	return ""
}
