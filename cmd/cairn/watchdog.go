package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cairn-gateway/cairn/buffer"
)

// notifier speaks systemd's notify protocol (sd_notify): READY=1 at once
// (it runs once the store is open and the listeners are bound), then
// WATCHDOG=1 at half the watchdog interval for as long as ingest is
// healthy. Outside systemd (no NOTIFY_SOCKET) it sends nothing.
//
// Ingest is healthy when the writer's goroutine answers a ping within half
// the interval (it is not stuck in a group commit, say on a disk that has
// stopped answering) and group commits are not failing. While it is not,
// the pings stop and systemd restarts the service once WatchdogSec passes.
type notifier struct {
	writer   *buffer.Writer
	interval time.Duration // systemd's watchdog interval; 0 for none
	log      *slog.Logger
}

// run notifies until ctx ends and returns nil.
func (n *notifier) run(ctx context.Context) error {
	n.notify(daemon.SdNotifyReady)
	if n.interval <= 0 {
		<-ctx.Done()
		return nil
	}
	every := n.interval / 2
	tick := time.NewTicker(every)
	defer tick.Stop()
	healthy := true
	last := n.writer.Stats()
	for {
		err := n.check(ctx, every, &last)
		switch {
		case ctx.Err() != nil, errors.Is(err, buffer.ErrClosed): // stopping
			return nil
		case err == nil:
			n.notify(daemon.SdNotifyWatchdog)
			if !healthy {
				n.log.Info("ingest is healthy again; feeding systemd's watchdog")
			}
		case healthy:
			n.log.Error("ingest is not healthy; no longer feeding systemd's watchdog", "err", err)
		}
		healthy = err == nil
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// check returns nil if ingest is healthy: the writer answers a ping within
// timeout, and group commits succeeded since the last check or none
// failed. last holds the writer's counters of the last check.
func (n *notifier) check(ctx context.Context, timeout time.Duration, last *buffer.WriterStats) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := n.writer.Ping(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return errors.New("the store's writer has not answered for " + timeout.String())
		}
		return err
	}
	st := n.writer.Stats()
	defer func() { *last = st }()
	if st.Failures > last.Failures && st.Commits == last.Commits {
		return errors.New("every group commit failed since the last check")
	}
	return nil
}

// notify sends state to systemd, logging a failure.
func (n *notifier) notify(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("systemd notify", "state", state, "err", err)
	}
}
