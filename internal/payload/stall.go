package payload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStalled is the cause of a blob download given up for lack of
// progress. The message is retried after its retry delay, like any failed
// request.
var ErrStalled = errors.New("azdispatch: blob download stalled")

// Stall bounds a blob download by its progress instead of by a fixed
// time: it is given up when fewer than minBytes (or the rest of the blob,
// if less) arrive in any window, the first window including the wait for
// the response. A slow link still completes a large payload; a dead one is
// found out within a window.
type Stall struct {
	Window   time.Duration
	MinBytes int64
}

// DefaultStall gives up below 64 KiB in 30 s, about 2 KB/s: a 64 MiB
// payload may take up to nine hours, and a connection that stops answering
// costs 30 s, as the per-try timeout would.
var DefaultStall = Stall{Window: 30 * time.Second, MinBytes: 64 << 10}

// progressKey carries a download's byte count from Watch to Count.
type progressKey struct{}

// Watch returns a context for downloading size bytes that is cancelled,
// with a cause wrapping ErrStalled, when the download stalls, and the
// function that ends the watch (call it once the download is over).
func (b Stall) Watch(ctx context.Context, size int64) (context.Context, func()) {
	if b.Window <= 0 {
		b = DefaultStall
	}
	ctx, cancel := context.WithCancelCause(ctx)
	read := new(atomic.Int64)
	ctx = context.WithValue(ctx, progressKey{}, read)
	var (
		mu      sync.Mutex
		stopped bool
		last    int64
		timer   *time.Timer
	)
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		n := read.Load()
		if need := min(b.MinBytes, size-last); n-last < need {
			cancel(fmt.Errorf("%w: %d bytes in %v, fewer than %d", ErrStalled, n-last, b.Window, need))
			return
		}
		last = n
		timer.Reset(b.Window)
	}
	mu.Lock()
	timer = time.AfterFunc(b.Window, check)
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		mu.Unlock()
		cancel(nil)
	}
}

// Count wraps r so that what it reads counts as progress of the download
// watched by ctx.
func (Stall) Count(ctx context.Context, r io.Reader) io.Reader {
	read, _ := ctx.Value(progressKey{}).(*atomic.Int64)
	if read == nil {
		return r
	}
	return &countingReader{r: r, read: read}
}

// Explain replaces err by the stall that caused it, if one did.
func (Stall) Explain(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
		return cause
	}
	return err
}

type countingReader struct {
	r    io.Reader
	read *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}
