package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumEnv names a Chrome or Chromium binary to use instead of the
// one found on the PATH.
const chromiumEnv = "AZDISPATCH_CHROMIUM"

// howToGetChromium is what a run without a browser says.
const howToGetChromium = "the end-to-end tests need Chromium: install it (Debian/Ubuntu: apt-get install chromium; " +
	"macOS: brew install --cask chromium) or set " + chromiumEnv + " to a Chrome or Chromium binary"

// chromium finds the browser, or fails the test saying how to get one.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v; %s", chromiumEnv, p, err, howToGetChromium)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal(howToGetChromium)
	return ""
}

// browser is one headless Chromium with a tab, and what its pages logged.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string          // console errors, exceptions, CSP violations
	headers  map[string]string // of the last document loaded
}

// newBrowser starts Chromium with a fresh profile and no network of its
// own (this machine's is closed), and closes it when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{ctx: ctx}
	start, cancelStart := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelStart()
	// The first action opens the tab (and must not be the one with a
	// timeout, which would stop the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v (%s)", err, howToGetChromium)
	}
	listen := func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == "error" || ev.Type == "warning" || ev.Type == "assert" {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				b.problems = append(b.problems, fmt.Sprintf("console %s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				b.problems = append(b.problems, fmt.Sprintf("log %s (%s): %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeDocument {
				b.headers = map[string]string{}
				for k, v := range ev.Response.Headers {
					b.headers[strings.ToLower(k)] = fmt.Sprint(v)
				}
			}
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatalf("listening to Chromium: %v", err)
	}
	for _, enable := range []func() error{
		func() error { _, err := chromedp.Call(start, log.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(start, runtime.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(start, network.Enable, network.EnableParams{}); return err },
	} {
		if err := enable(); err != nil {
			t.Fatalf("enabling Chromium's events: %v", err)
		}
	}
	return b
}

// patience bounds every step: generous, since a loaded machine is slow,
// and a step waits for a condition rather than for a time.
const patience = 60 * time.Second

// do runs steps with patience.
func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, patience)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page, with patience.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, patience)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: evaluating %s: %v", expr, err)
	}
	return v
}

// waitTrue polls a JavaScript condition until it holds, with patience.
func (b *browser) waitTrue(t *testing.T, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, patience)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("browser: waiting for %s: %v", expr, err)
	}
}

// takeProblems returns what pages logged as errors since the last call.
func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

func (b *browser) documentHeaders() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.headers
}

// resolvedURLs returns every URL the current page links to, loads or
// posts to, resolved by the browser.
func resolvedURLs(t *testing.T, b *browser) []string {
	t.Helper()
	return eval[[]string](t, b, `[...document.querySelectorAll("a[href], link[href], script[src], form[action], img[src]")].map(e => e.href || e.src || new URL(e.getAttribute("action"), location.href).href)`)
}
