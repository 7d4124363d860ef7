package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// LeaseOptions configures a [Lease]. Nil, or a zero field, means the
// documented default.
type LeaseOptions struct {
	// Container holds the lease blobs. Defaults to "azdispatch-leases". It
	// and the blob are created on first use.
	Container string

	// Duration is the lease period, 15 to 60 s (the service's bounds). A
	// holder that dies is replaced at most Duration plus AcquireEvery after
	// its last renewal. Defaults to 30 s.
	Duration time.Duration

	// RenewEvery is how often the holder renews; it must be less than
	// Duration. Defaults to Duration/3, so that two renewals can fail before
	// the lease is at risk. A failed renewal is retried every second.
	RenewEvery time.Duration

	// AcquireEvery is how often a process waiting for the lease tries to take
	// it (±20%). Defaults to Duration/3. Each try is a billable request: at
	// the defaults a waiting process makes 360 an hour, and so does the holder.
	AcquireEvery time.Duration

	// Logger receives the lease's comings and goings. Defaults to none.
	Logger *slog.Logger
}

// Lease lets one process among several run a function at a time, over a
// lease on a blob in one account: a single active distributor, say, that
// feeds many queues, with a standby ready to take over.
// Create one per contender with [NewLease]; every contender names the same
// blob.
//
// The holder renews the lease every [LeaseOptions.RenewEvery]. It considers the
// lease lost, and cancels its function's context with cause [ErrOwnershipLost],
// when the service says another holder has it, or when no renewal has succeeded
// for [LeaseOptions.Duration] less a margin (a tenth) counted from when the
// last successful renewal was sent, so that it stops before the service can
// give the lease to anyone else. A holder that exits cleanly releases the
// lease, and a waiting contender takes it at its next try.
//
// None of that stops a holder that is paused (not running at all) past its
// lease from resuming and writing after its successor started: give every
// such write the holder's fence, which [LeaseFence] reads from the function's
// context, and have the storage refuse a write with an older fence than the
// data's.
type Lease struct {
	name      string
	opts      LeaseOptions
	container *container.Client
	blob      *blockblob.Client
	client    *lease.BlobClient
	log       *slog.Logger
	tx        counter
}

// NewLease returns a contender for the lease on the blob called name in
// the account's blob service.
func NewLease(a *Account, name string, opts *LeaseOptions) (*Lease, error) {
	if a == nil {
		return nil, &ConfigError{Field: "account", Reason: "nil"}
	}
	if name == "" {
		return nil, &ConfigError{Field: "name", Reason: "empty"}
	}
	var c LeaseOptions
	if opts != nil {
		c = *opts
	}
	setDefault(&c.Container, "azdispatch-leases")
	setDefault(&c.Duration, 30*time.Second)
	setDefault(&c.RenewEvery, c.Duration/3)
	setDefault(&c.AcquireEvery, c.Duration/3)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Duration < 15*time.Second || c.Duration > 60*time.Second:
		return nil, &ConfigError{Field: "LeaseOptions.Duration", Reason: fmt.Sprintf("%v is not between 15 s and 60 s", c.Duration)}
	case c.RenewEvery <= 0 || c.RenewEvery >= c.Duration:
		return nil, &ConfigError{Field: "LeaseOptions.RenewEvery", Reason: fmt.Sprintf("%v must be more than 0 and less than Duration", c.RenewEvery)}
	case c.AcquireEvery <= 0:
		return nil, &ConfigError{Field: "LeaseOptions.AcquireEvery", Reason: "must be more than 0"}
	}
	svc, err := a.blobService()
	if err != nil {
		return nil, err
	}
	cc := svc.NewContainerClient(c.Container)
	bb := cc.NewBlockBlobClient(name)
	lc, err := lease.NewBlobClient(bb, nil) // a fresh random lease ID per contender
	if err != nil {
		return nil, wrapf(err, "lease client")
	}
	l := &Lease{name: name, opts: c, container: cc, blob: bb, client: lc}
	l.log = c.Logger.With("lease", l.path())
	return l, nil
}

// path is the lease blob's, "<container>/<name>", as errors and logs name it.
func (l *Lease) path() string { return l.opts.Container + "/" + l.name }

// Transactions counts the requests this contender made: lease requests; for
// each acquisition, the read and the metadata write that advance the fence;
// and the blob writes that create the container and blob the first time.
// The function's own requests are not counted here.
func (l *Lease) Transactions() Transactions { return l.tx.snapshot() }

// Run waits until it holds the lease, then runs fn with a context that ends
// when ctx does or when the lease is lost (cause [ErrOwnershipLost]), renewing
// the lease meanwhile. The context carries this holder's fence (see
// [LeaseFence]). When fn returns, Run releases the lease and returns fn's
// error. If the lease is lost it waits for fn to return and returns an
// error wrapping ErrOwnershipLost. If ctx ends before the lease is held, it
// returns ctx's cause. To keep contending after a loss, call Run again.
func (l *Lease) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	// fn's context derives from the caller's, not from the counted one, so
	// that fn's requests are not counted as the lease's.
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx = countIn(ctx, &l.tx)
	sent, fence, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	l.log.Info("lease acquired", "fence", fence)
	fnCtx = context.WithValue(fnCtx, leaseFenceKey{}, fence)
	done := make(chan error, 1)
	go func() { done <- fn(fnCtx) }()

	lost := l.keep(ctx, sent, done)
	if lost != nil {
		cancel(lost)
		l.log.Warn("lease lost; the function's context is cancelled", "err", lost)
		if fnErr := <-done; fnErr != nil && !errors.Is(fnErr, context.Canceled) {
			return errors.Join(lost, fnErr)
		}
		return lost
	}
	fnErr := <-done // keep returned because fn did, or because ctx ended and fn followed
	l.release(ctx)
	return fnErr
}

// keep renews the lease until fn returns (nil result) or the lease is lost
// (an error wrapping [ErrOwnershipLost]). When ctx ends it waits for fn, whose
// context ends with it, still renewing, so that fn never runs unheld.
func (l *Lease) keep(ctx context.Context, sent time.Time, done chan error) error {
	deadline := sent.Add(l.opts.Duration - l.opts.Duration/10)
	renew := time.NewTimer(l.opts.RenewEvery)
	defer renew.Stop()
	for {
		expire := time.NewTimer(time.Until(deadline))
		select {
		case err := <-done:
			expire.Stop()
			done <- err // for Run
			return nil
		case <-expire.C:
			return fmt.Errorf("%w: lease %s: no renewal succeeded for %v", ErrOwnershipLost, l.path(), l.opts.Duration-l.opts.Duration/10)
		case <-renew.C:
			expire.Stop()
			// Not cut short by ctx: fn may still be running and need the lease.
			rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
			at := time.Now()
			_, err := l.client.RenewLease(tagBlob(rctx, opBlobLease), nil)
			cancel()
			switch {
			case err == nil:
				deadline = at.Add(l.opts.Duration - l.opts.Duration/10)
				renew.Reset(l.opts.RenewEvery)
			case leaseGone(err):
				return fmt.Errorf("%w: %w", ErrOwnershipLost, blobError(opBlobLease, l.path(), err))
			default:
				l.log.Warn("lease renewal failed; retrying", "err", blobError(opBlobLease, l.path(), err))
				renew.Reset(min(time.Second, l.opts.RenewEvery))
			}
		}
	}
}

// acquire tries to take the lease every AcquireEvery until it does and has
// advanced its fence, or until ctx ends. It returns when the successful
// acquire request was sent (the lease runs from no earlier than that) and
// the fence.
func (l *Lease) acquire(ctx context.Context) (time.Time, int64, error) {
	for {
		at := time.Now()
		_, err := l.client.AcquireLease(tagBlob(ctx, opBlobLease), seconds(l.opts.Duration), nil)
		if err != nil && missing(err) && l.create(ctx) == nil {
			at = time.Now()
			_, err = l.client.AcquireLease(tagBlob(ctx, opBlobLease), seconds(l.opts.Duration), nil)
		}
		if err == nil {
			fence, ferr := l.advance(ctx)
			if ferr == nil {
				return at, fence, nil
			}
			// Held without a fence, which is no use to fn: let the others
			// have it rather than make them wait for it to expire.
			l.release(ctx)
			switch {
			case errors.Is(ferr, errBadFence):
				return time.Time{}, 0, ferr
			case ctx.Err() == nil:
				l.log.Warn("lease fence not advanced; retrying", "err", ferr)
			}
		} else {
			switch {
			case ctx.Err() != nil:
				return time.Time{}, 0, context.Cause(ctx)
			case !held(err):
				l.log.Warn("lease acquire failed; retrying", "err", blobError(opBlobLease, l.path(), err))
			}
		}
		wait := time.Duration(float64(l.opts.AcquireEvery) * (0.8 + 0.4*rand.Float64()))
		if !syncx.Sleep(ctx, wait, nil) {
			return time.Time{}, 0, context.Cause(ctx)
		}
	}
}

// create makes the container and the empty blob the lease is taken on.
// Another contender may be doing the same: "already exists" is success.
func (l *Lease) create(ctx context.Context) error {
	if _, err := l.container.Create(tagBlob(ctx, opBlobWrite), nil); err != nil && !conflict(err) {
		return blobError(opBlobWrite, l.path(), err)
	}
	_, err := l.blob.UploadBuffer(tagBlob(ctx, opBlobWrite), nil, &blockblob.UploadBufferOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}},
	})
	if err != nil && !conflict(err) {
		return blobError(opBlobWrite, l.path(), err)
	}
	return nil
}

// release gives the lease up so that a waiting contender need not wait for
// it to expire. A failure only delays that.
func (l *Lease) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := l.client.ReleaseLease(tagBlob(rctx, opBlobLease), nil); err != nil {
		l.log.Warn("lease release failed; it expires on its own", "err", blobError(opBlobLease, l.path(), err))
		return
	}
	l.log.Info("lease released")
}

// leaseFenceMeta names the lease blob's metadata entry that holds the
// fence of its latest holder.
const leaseFenceMeta = "fence"

// errBadFence: the lease blob's fence entry is not a positive number.
// Counting again from 1 could hand out a number already used, so a
// contender gives up instead.
var errBadFence = errors.New("the lease blob's fence is not a positive number")

// leaseFenceKey is the context key under which Run hands fn its fence.
type leaseFenceKey struct{}

// LeaseFence returns the fencing token of the lease held for the function
// that [Lease.Run] called with ctx (or with a context ctx derives from), and
// false for any other context.
//
// The fence is the lease's generation: each time any contender takes the
// lease, its fence is greater than every fence handed out before, by any
// contender. A fence counts from 1.
//
// A lease alone cannot keep two holders from overlapping. A holder paused
// past its lease (a long garbage collection, a stopped process, a frozen
// virtual machine) resumes with its function still running after another
// process took the lease; nothing runs during the pause to cancel its
// context, and a check of ctx just before a write cannot rule out a pause
// just after the check. Only writes that the storage refuses from an older
// holder are safe, and the fence is what lets it refuse them: carry it into
// every write that must not come from two holders at once.
//
//   - Store the fence of the latest writer beside the data: in a blob's
//     metadata, an entity's property, a column.
//   - Write only if the stored fence is not greater than yours, and make the
//     write conditional on the data being unchanged since you read that
//     fence (If-Match with the ETag you read; a compare-and-set in SQL), so
//     that a newer holder writing in between makes your write fail.
//   - Treat a refused write as the lease lost: return from the function.
//
// Writes that do not check the fence are not protected: a paused holder
// makes them after its successor started. See the example.
//
// The fence is kept in the lease blob's metadata. Deleting that blob starts
// the count again from 1, and data fenced with the old numbers then refuses
// the new holders until the count passes them.
func LeaseFence(ctx context.Context) (int64, bool) {
	f, ok := ctx.Value(leaseFenceKey{}).(int64)
	return f, ok
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
// used the fence it wrote, so skipping it is harmless. If the write also
// finds the blob changed since the read (a retry of this very write that
// had succeeded, unseen), it reads again: the number can only grow.
func (l *Lease) advance(ctx context.Context) (int64, error) {
	for try := 0; ; try++ {
		props, err := l.blob.GetProperties(tagBlob(ctx, opBlobRead), nil)
		if err != nil {
			return 0, blobError(opBlobRead, l.path(), err)
		}
		meta, prev, err := splitFence(props.Metadata)
		if err != nil {
			return 0, wrapf(err, "lease %s", l.path())
		}
		next := prev + 1
		meta[leaseFenceMeta] = to.Ptr(strconv.FormatInt(next, 10))
		_, err = l.blob.SetMetadata(tagBlob(ctx, opBlobWrite), meta, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions:    &blob.LeaseAccessConditions{LeaseID: l.client.LeaseID()},
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: props.ETag},
		}})
		switch {
		case err == nil:
			return next, nil
		case !bloberror.HasCode(err, bloberror.ConditionNotMet) || try == 2:
			return 0, blobError(opBlobWrite, l.path(), err)
		}
	}
}

// splitFence returns the blob's metadata without its fence entry, and that
// fence (0 if there is none yet). The service may return metadata names in
// any case, so the name matches case-insensitively.
func splitFence(mp map[string]*string) (map[string]*string, int64, error) {
	rest := make(map[string]*string, len(mp)+1)
	var fence int64
	for name, v := range mp {
		if !strings.EqualFold(name, leaseFenceMeta) {
			rest[name] = v
			continue
		}
		var err error
		if v == nil {
			return nil, 0, fmt.Errorf("%w: empty", errBadFence)
		}
		if fence, err = strconv.ParseInt(*v, 10, 64); err != nil || fence < 1 {
			return nil, 0, fmt.Errorf("%w: %q", errBadFence, *v)
		}
	}
	return rest, fence, nil
}
