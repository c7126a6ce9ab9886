package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which scripts/test.sh installs. The
// tests that need it fail without it: a dashboard nobody opened in a
// browser is not tested.
const chromiumPath = "/usr/bin/chromium"

// browser is a headless chromium with one tab. It keeps what the page
// reports as going wrong: console messages of level error, uncaught
// exceptions, log entries of level error and failed requests.
type browser struct {
	ctx context.Context
	out *logLines // chromium's own output

	mu       sync.Mutex
	problems []string           // guarded by mu
	urls     map[string]string  // guarded by mu: request id → URL
	allowed  func(int64) bool   // guarded by mu: HTTP statuses that are no problem
	statuses map[string][]int64 // guarded by mu: URL → statuses answered
}

// startBrowser starts headless chromium, 1280 by 900 pixels, for the test;
// it is closed when the test ends.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless chromium is needed (apt-get install chromium; scripts/test.sh installs it): %v", err)
	}
	b := &browser{out: newLogLines(), urls: map[string]string{}, statuses: map[string][]int64{}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		// CI runs the tests as root, where chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(b.out),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if t.Failed() {
			// Without a system bus chromium complains of it at length.
			var lines []string
			for _, l := range strings.Split(b.out.String(), "\n") {
				if !strings.Contains(l, "dbus") {
					lines = append(lines, l)
				}
			}
			t.Logf("chromium's output, but for its D-Bus errors:\n%s", strings.Join(lines, "\n"))
		}
	})
	b.ctx = ctx
	if err := chromedp.Listen(ctx, b.listen); err != nil {
		t.Fatalf("start chromium: %v\noutput:\n%s", err, b.out)
	}
	return b
}

// listen runs in the tab's event loop: it must return at once.
func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.problems = append(b.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, text))
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && !b.allowedEntry(ev.Entry) {
			b.problems = append(b.problems, fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	case *network.EventRequestWillBeSent:
		b.urls[string(ev.RequestID)] = ev.Request.URL
	case *network.EventResponseReceived:
		url, status := ev.Response.URL, ev.Response.Status
		b.statuses[url] = append(b.statuses[url], status)
		if status >= 400 && (b.allowed == nil || !b.allowed(status)) {
			b.problems = append(b.problems, fmt.Sprintf("%s answered %d", url, status))
		}
	case *network.EventLoadingFailed:
		// A fetch the page itself left behind, by going to another
		// page, is cancelled: that is no failure.
		if !ev.Canceled {
			b.problems = append(b.problems, fmt.Sprintf("%s failed: %s %s", b.urls[string(ev.RequestID)], ev.ErrorText, ev.BlockedReason))
		}
	}
}

// allowedEntry reports whether a log entry is the browser's note of a
// response whose status the test expects. mu is held.
func (b *browser) allowedEntry(e *log.Entry) bool {
	if e.Source != log.EntrySourceNetwork || b.allowed == nil {
		return false
	}
	for _, s := range b.statuses[e.URL] {
		if !b.allowed(s) {
			return false
		}
	}
	return len(b.statuses[e.URL]) > 0
}

// allow makes responses of the statuses for which ok reports true no
// problem.
func (b *browser) allow(ok func(status int64) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = ok
}

// checkProblems fails the test if the page reported anything going wrong
// so far.
func (b *browser) checkProblems(t *testing.T, when string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("%s: %s", when, p)
	}
	b.problems = nil
}

// do runs actions in the tab and fails the test on error.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page and decodes its
// value as T; it fails the test on error.
func eval[T any](t *testing.T, b *browser, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS polls a JavaScript expression until it is true, and fails the
// test if that takes longer than timeout; state, another expression,
// says on failure how the page was.
func waitJS(t *testing.T, b *browser, timeout time.Duration, what, cond, state string) {
	t.Helper()
	waitUntil(t, timeout, what, func() (bool, string) {
		time.Sleep(40 * time.Millisecond) // on top of waitUntil's 10 ms: spare the two cores
		if eval[bool](t, b, cond) {
			return true, ""
		}
		return false, eval[string](t, b, state)
	})
}
