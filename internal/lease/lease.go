// Package lease lets one process among several run a function at a time,
// over a lease on one blob, and hands each holder a fencing token greater
// than every one handed out before: the machinery behind azdispatch.Lease,
// on any [blobs.Backend], so that it runs in memory as it does against the
// service.
//
// A holder renews its lease every RenewEvery, and takes it for lost when
// the service says so (another holds it, or the blob is gone) or when no
// renewal has succeeded for nine tenths of the lease's duration, counted
// from when the last successful renewal was sent: a renewal that took
// effect at the service did so no earlier, so the holder stops before the
// service can give the lease to anyone else, whatever the two clocks say.
//
// The fence is the lease blob's metadata entry "fence", advanced by one
// under the lease just taken: a write the service refuses from anyone but
// the lease's holder, so that a holder whose lease expired between its read
// and its write (paused, say) cannot hand out the number its successor
// hands out too.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// FenceMeta names the lease blob's metadata entry that holds the fence of
// its latest holder.
const FenceMeta = "fence"

// ErrBadFence is matched by the error of Run when the lease blob's fence
// entry is not a positive number. Counting again from 1 could hand out a
// number already used, so a contender gives up instead.
var ErrBadFence = errors.New("the lease blob's fence is not a positive number")

// Options configures a [Contender]. Every duration must be set; the
// caller checks them against the service's bounds.
type Options struct {
	Duration     time.Duration // the lease period
	RenewEvery   time.Duration // less than Duration
	AcquireEvery time.Duration // a waiting contender's tries, ±20%
	Logger       *slog.Logger  // nil for none
	// Lost is the sentinel the error of a lost lease wraps.
	Lost error
}

// Contender is one process's contender for the lease on one blob.
type Contender struct {
	b    blobs.Backend
	name string
	id   string // this contender's lease ID, fresh and random
	o    Options
	log  *slog.Logger

	// releasedAt is when this contender last released the lease, in
	// UnixNano; 0 for never (see yieldTurn).
	releasedAt atomic.Int64
}

// New returns a contender for the lease on the blob called name in b.
func New(b blobs.Backend, name string, o Options) *Contender {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Contender{b: b, name: name, id: blobs.NewLeaseID(), o: o}
	c.log = o.Logger.With("lease", c.Path())
	return c
}

// Path is the lease blob's "<container>/<name>", as errors and logs name it.
func (c *Contender) Path() string { return c.b.Container() + "/" + c.name }

// Run waits until it holds the lease and has advanced its fence, then
// runs fn with a context that ends when ctx does or when the lease is lost
// (with cause an error wrapping Options.Lost), renewing the lease
// meanwhile. When fn returns, Run releases the lease and returns fn's
// error; when the lease is lost, it waits for fn and returns the loss
// (joined with fn's error, unless that is a cancellation). If ctx ends
// before the lease is held, it returns ctx's cause.
func (c *Contender) Run(ctx context.Context, fn func(ctx context.Context, fence int64) error) error {
	if ctx.Err() != nil || !c.yieldTurn(ctx) {
		return context.Cause(ctx) // no request made for a caller gone already
	}
	sent, fence, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	c.log.Info("lease acquired", "fence", fence)
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- fn(fnCtx, fence) }()

	if lost := c.keep(ctx, sent, done); lost != nil {
		cancel(lost)
		c.log.Warn("lease lost; the function's context is cancelled", "err", lost)
		if fnErr := <-done; fnErr != nil && !errors.Is(fnErr, context.Canceled) {
			return errors.Join(lost, fnErr)
		}
		return lost
	}
	fnErr := <-done // keep returned because fn did, or because ctx ended and fn followed
	c.release(ctx)
	return fnErr
}

// yieldTurn waits, after this contender released the lease, until every
// contender waiting for it has tried to take it (each tries at least every
// AcquireEvery and a fifth), so that one that runs its function again at
// once does not take it back before the others ever see it free. It
// reports false if ctx ended first.
func (c *Contender) yieldTurn(ctx context.Context) bool {
	released := c.releasedAt.Load()
	if released == 0 {
		return true
	}
	wait := c.o.AcquireEvery*3/2 - time.Since(time.Unix(0, released))
	return wait <= 0 || syncx.Sleep(ctx, wait, nil)
}

// keep renews the lease until fn returns (nil result) or the lease is lost
// (an error wrapping Options.Lost). When ctx ends it waits for fn, whose
// context ends with it, still renewing, so that fn never runs unheld.
func (c *Contender) keep(ctx context.Context, sent time.Time, done chan error) error {
	safe := c.o.Duration - c.o.Duration/10
	deadline := sent.Add(safe)
	renew := time.NewTimer(c.o.RenewEvery)
	defer renew.Stop()
	for {
		expire := time.NewTimer(time.Until(deadline))
		select {
		case err := <-done:
			expire.Stop()
			done <- err // for Run
			return nil
		case <-expire.C:
			return fmt.Errorf("%w: lease %s: no renewal succeeded for %v", c.o.Lost, c.Path(), safe)
		case <-renew.C:
			expire.Stop()
			// Not cut short by ctx: fn may still be running and need the lease.
			rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
			at := time.Now()
			_, err := c.b.RenewLease(rctx, c.name, c.id)
			cancel()
			switch {
			case err == nil:
				deadline = at.Add(safe)
				renew.Reset(c.o.RenewEvery)
			case gone(err):
				return fmt.Errorf("%w: %w", c.o.Lost, err)
			default:
				c.log.Warn("lease renewal failed; retrying", "err", err)
				renew.Reset(min(time.Second, c.o.RenewEvery))
			}
		}
	}
}

// acquire tries to take the lease every AcquireEvery until it does and has
// advanced its fence, or until ctx ends. It returns when the successful
// acquire request was sent (the lease runs from no earlier than that) and
// the fence.
func (c *Contender) acquire(ctx context.Context) (time.Time, int64, error) {
	for {
		at := time.Now()
		_, err := c.b.AcquireLease(ctx, c.name, c.id, c.o.Duration)
		if errors.Is(err, blobs.ErrNotFound) && c.create(ctx) == nil {
			at = time.Now()
			_, err = c.b.AcquireLease(ctx, c.name, c.id, c.o.Duration)
		}
		if err == nil {
			fence, ferr := c.advance(ctx)
			if ferr == nil {
				return at, fence, nil
			}
			// Held without a fence, which is no use to fn: let the others
			// have it rather than make them wait for it to expire.
			c.release(ctx)
			switch {
			case errors.Is(ferr, ErrBadFence):
				return time.Time{}, 0, ferr
			case ctx.Err() == nil:
				c.log.Warn("lease fence not advanced; retrying", "err", ferr)
			}
		} else {
			switch {
			case ctx.Err() != nil:
				return time.Time{}, 0, context.Cause(ctx)
			case !errors.Is(err, blobs.ErrLeased):
				c.log.Warn("lease acquire failed; retrying", "err", err)
			}
		}
		wait := time.Duration(float64(c.o.AcquireEvery) * (0.8 + 0.4*mrand.Float64()))
		if !syncx.Sleep(ctx, wait, nil) {
			return time.Time{}, 0, context.Cause(ctx)
		}
	}
}

// create makes the empty blob the lease is taken on (and its container,
// which the backend makes when a write finds it missing). Another
// contender may be doing the same: a blob that exists is success.
func (c *Contender) create(ctx context.Context) error {
	if _, err := c.b.Create(ctx, c.name, blobs.Write{}); err != nil && !errors.Is(err, blobs.ErrConflict) {
		return err
	}
	return nil
}

// release gives the lease up so that a waiting contender need not wait for
// it to expire. A failure only delays that.
func (c *Contender) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c.releasedAt.Store(time.Now().UnixNano()) // tried: the others may see it free
	if _, err := c.b.ReleaseLease(rctx, c.name, c.id); err != nil {
		c.log.Warn("lease release failed; it expires on its own", "err", err)
		return
	}
	c.log.Info("lease released")
}

// advance sets the lease blob's fence to one more than the fence stored
// there, under the lease just acquired, and returns it.
//
// The write is conditional on the lease: a holder whose lease expired while
// it was between its read and its write (paused, say) is refused, and its
// successor, which read the same number, is the only one to use it. Run
// hands a fence to fn only once it is stored, so every fence a holder ever
// saw is stored, and a later holder reads it, or a greater one, and goes
// past it. A holder that dies, or fails, before or after its write never
// used the fence it wrote, so skipping it is harmless. A write whose
// answer was lost and that is sent again writes the same number under the
// same lease: the second changes nothing.
func (c *Contender) advance(ctx context.Context) (int64, error) {
	info, err := c.b.Properties(ctx, c.name)
	if err != nil {
		return 0, err
	}
	meta, prev, err := SplitFence(info.Metadata)
	if err != nil {
		return 0, fmt.Errorf("lease %s: %w", c.Path(), err)
	}
	next := prev + 1
	meta[FenceMeta] = strconv.FormatInt(next, 10)
	if _, err := c.b.SetLeasedMetadata(ctx, c.name, meta, c.id); err != nil {
		return 0, err
	}
	return next, nil
}

// SplitFence returns the blob's metadata without its fence entry, and that
// fence (0 if there is none yet). The service may return metadata names in
// any case, so the name matches case-insensitively.
func SplitFence(meta map[string]string) (map[string]string, int64, error) {
	rest := make(map[string]string, len(meta)+1)
	var fence int64
	for name, v := range meta {
		if !strings.EqualFold(name, FenceMeta) {
			rest[name] = v
			continue
		}
		var err error
		if fence, err = strconv.ParseInt(v, 10, 64); err != nil || fence < 1 {
			return nil, 0, fmt.Errorf("%w: %q", ErrBadFence, v)
		}
	}
	return rest, fence, nil
}

// gone reports whether a renewal's error says this holder's lease is not
// its own any more: another holds it, the blob is gone, or the service
// refused it for good (a 4xx other than a timeout or throttling), as
// opposed to a failure that a renewal a second later may not meet.
func gone(err error) bool {
	if errors.Is(err, blobs.ErrLeased) || errors.Is(err, blobs.ErrNotFound) {
		return true
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	s := re.StatusCode
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}
