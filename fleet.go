package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/lease"
	"github.com/azdispatch/azdispatch/internal/pause"
)

// What the processes of a fleet agree on through storage alone, with
// nothing else to run: a pause, which stops every listener of a queue in
// every process, and a lease, which lets one process at a time run a
// function (its machinery is internal/lease).

// A pause stops every listener of a queue, in every process, from
// receiving, until it ends or a [Pauser.Resume]: the lever an operator
// pulls when what the handlers call is down. It is kept with the queue
// itself, in one entry of its metadata, so that it needs nothing else to
// agree on, and it ends on the service's clock, whatever the clocks of the
// machines that paused it or listen say.

// Pauser is a source whose listeners can be paused: a [*Queue], a
// [ShardedQueue] (all its shards as one), or a memqueue. A [Listener] on a
// Pauser reads its pause at most once per [ScalingOptions.ScaleInterval]
// (with the depth it reads anyway while busy), and receives nothing while
// it is on; handlers under way finish, and messages in hand are tried.
type Pauser interface {
	// Pause pauses the queue for at least d from now on the service's
	// clock (its end is kept to the second, up to two seconds later), and
	// returns the pause as kept. A pause given while one is on replaces it;
	// of two operators' pauses and resumes at once, the last written wins.
	Pause(ctx context.Context, d time.Duration, opts *PauseOptions) (PauseState, error)
	// Resume ends a pause now; it does nothing to a queue not paused.
	Resume(ctx context.Context) error
	// PauseState reads the queue's pause: the zero PauseState if none,
	// or if the last one has ended.
	PauseState(ctx context.Context) (PauseState, error)
}

// PauseOptions says more of a pause. Nil means the defaults.
type PauseOptions struct {
	// By says who paused, and why, for the operators who see the pause
	// (the command-line tool, the dashboard, [State.Paused]): up to 256
	// bytes of any text. Defaults to none.
	By string
}

// PauseState is a queue's pause: from when until when on the service's
// clock, and who paused it. The zero PauseState is a queue not paused.
type PauseState struct {
	Since, Until time.Time
	By           string
}

// Active reports whether the pause holds at now, a time on the service's
// clock (see [Queue.ServiceTime]).
func (p PauseState) Active(now time.Time) bool { return pause.State(p).ActiveAt(now) }

var (
	_ Pauser = (*Queue)(nil)
	_ Pauser = (*ShardedQueue)(nil)
)

// checkPause checks a pause's duration and options.
func checkPause(d time.Duration, opts *PauseOptions) (PauseOptions, error) {
	var o PauseOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case d <= 0:
		return o, &ConfigError{Field: "pause duration", Reason: fmt.Sprintf("%v; need more than 0 (Resume ends a pause)", d)}
	case d > pause.MaxFor:
		return o, &ConfigError{Field: "pause duration", Reason: fmt.Sprintf("%v; at most 100 years (Resume ends a pause)", d)}
	case len(o.By) > pause.MaxBy:
		return o, &ConfigError{Field: "PauseOptions.By", Reason: fmt.Sprintf("%d bytes; at most %d", len(o.By), pause.MaxBy)}
	}
	return o, nil
}

// Pause pauses the queue's listeners for d (see [Pauser]): two requests,
// a read of the queue's metadata, whose answer gives the service's time,
// and a write of it with the pause.
func (q *Queue) Pause(ctx context.Context, d time.Duration, opts *PauseOptions) (PauseState, error) {
	o, err := checkPause(d, opts)
	if err != nil {
		return PauseState{}, err
	}
	md, _, err := q.metadata(ctx)
	if err != nil {
		return PauseState{}, err
	}
	now := q.ServiceTime().UTC()
	st := pause.State{Since: now.Truncate(time.Second), Until: pause.EndOf(now, d), By: o.By}
	if err := q.setMetadata(ctx, pause.With(md, st)); err != nil {
		return PauseState{}, err
	}
	return PauseState(st), nil
}

// Resume ends the queue's pause (see [Pauser]): one read of its metadata,
// and a write if a pause was there.
func (q *Queue) Resume(ctx context.Context) error {
	md, _, err := q.metadata(ctx)
	if err != nil {
		return err
	}
	if _, ok := pause.Find(md); !ok {
		return nil
	}
	return q.setMetadata(ctx, pause.With(md, pause.State{}))
}

// PauseState reads the queue's pause (see [Pauser]): one Get Queue
// Properties request, counted as a depth read.
func (q *Queue) PauseState(ctx context.Context) (PauseState, error) {
	_, st, err := q.depthAndPause(ctx)
	return st, err
}

// depthAndPause reads the queue's depth and its pause in one request; a
// queue that does not exist is empty and not paused.
func (q *Queue) depthAndPause(ctx context.Context) (int, PauseState, error) {
	md, depth, err := q.metadata(ctx)
	if err != nil {
		return 0, PauseState{}, err
	}
	st, err := pause.Read(md)
	if err != nil {
		// Not a storage failure: the depth is good, and the entry no
		// pause this package wrote (taken as none, and logged).
		return depth, PauseState{}, fmt.Errorf("azdispatch: queue %q: metadata %q: %w", q.name, pause.MetadataName, err)
	}
	if !st.ActiveAt(q.ServiceTime()) {
		st = pause.State{}
	}
	return depth, PauseState(st), nil
}

// metadata reads the queue's metadata and depth: one Get Queue Properties.
func (q *Queue) metadata(ctx context.Context) (map[string]*string, int, error) {
	resp, err := q.client.GetProperties(tagRequest(ctx, OpDepth, q.tx), nil)
	switch {
	case err == nil:
		return resp.Metadata, int(deref(resp.ApproximateMessagesCount)), nil
	case queueerror.HasCode(err, queueerror.QueueNotFound):
		return nil, 0, nil
	}
	return nil, 0, storageError(OpDepth, q.name, err)
}

// setMetadata replaces the queue's metadata: one Set Queue Metadata.
func (q *Queue) setMetadata(ctx context.Context, md map[string]*string) error {
	_, err := q.client.SetMetadata(tagRequest(ctx, opQueueMetadata, q.tx), &azqueue.SetMetadataOptions{Metadata: md})
	return storageError(opQueueMetadata, q.name, err)
}

// Pause pauses every shard for d (see [Pauser]): two requests per shard,
// all at once, each shard's end on its own account's clock (the service
// keeps its clocks in step). A shard that fails is named in the error; the
// others are paused all the same, and a listener takes the set as paused
// while any shard is.
func (s *ShardedQueue) Pause(ctx context.Context, d time.Duration, opts *PauseOptions) (PauseState, error) {
	if _, err := checkPause(d, opts); err != nil {
		return PauseState{}, err
	}
	var st PauseState
	_, err := s.eachPauser(func(p Pauser) (PauseState, error) { return p.Pause(ctx, d, opts) }, &st)
	return st, err
}

// Resume ends the pause of every shard (see [Pauser]).
func (s *ShardedQueue) Resume(ctx context.Context) error {
	_, err := s.eachPauser(func(p Pauser) (PauseState, error) { return PauseState{}, p.Resume(ctx) }, nil)
	return err
}

// PauseState reads every shard's pause, at once, and returns the one that
// ends last: the set is paused while any shard is. As a depth read does,
// it passes over the shards that are backed off and gives each the
// shard's try timeout (see [ShardedQueueOptions.TryTimeout]), so that a
// shard that hangs does not hold up the listeners of the others; it fails
// only if no shard answered.
func (s *ShardedQueue) PauseState(ctx context.Context) (PauseState, error) {
	now := s.set.now()
	got := make([]PauseState, len(s.members))
	errs := make([]error, len(s.members))
	asked := make([]bool, len(s.members))
	var wg sync.WaitGroup
	for n, i := range s.members {
		p := s.set.caps[i].Pauser
		if p == nil || !s.set.admit(i, now) {
			continue
		}
		asked[n] = true
		wg.Go(func() {
			errs[n] = s.set.try(ctx, i, 0, false, func(ctx context.Context) (err error) {
				got[n], err = p.PauseState(ctx)
				return err
			})
		})
	}
	wg.Wait()
	var last PauseState
	var failed []error
	answered := 0
	for n := range got {
		switch {
		case !asked[n]:
		case errs[n] != nil:
			failed = append(failed, errs[n])
		default:
			answered++
			if got[n].Until.After(last.Until) {
				last = got[n]
			}
		}
	}
	if answered == 0 {
		return PauseState{}, s.noHealthy("pause", failed, now)
	}
	return last, nil
}

// eachPauser calls f for every shard at once, keeps in last the state
// that ends last of those f returned, and reports how many shards
// answered; a shard that is not a Pauser is an error.
func (s *ShardedQueue) eachPauser(f func(p Pauser) (PauseState, error), last *PauseState) (int, error) {
	errs := make([]error, len(s.members))
	got := make([]PauseState, len(s.members))
	var wg sync.WaitGroup
	for n, i := range s.members {
		p := s.set.caps[i].Pauser
		if p == nil {
			errs[n] = fmt.Errorf("shard %q cannot be paused", s.set.shards[i].Name())
			continue
		}
		wg.Go(func() { got[n], errs[n] = f(p) })
	}
	wg.Wait()
	answered := 0
	for n := range got {
		if errs[n] != nil {
			continue
		}
		answered++
		if last != nil && got[n].Until.After(last.Until) {
			*last = got[n]
		}
	}
	if err := errors.Join(errs...); err != nil {
		return answered, fmt.Errorf("azdispatch: sharded queue %q: %w", s.set.name, err)
	}
	return answered, nil
}

// pauseGate is the gate a listener's receives pass through, nil if its
// source cannot be paused: it reads the pause at most once per
// ScaleInterval, each read bounded as a receive is.
func (l *Listener[T]) pauseGate() *pause.Gate {
	p := l.caps.Pauser
	if p == nil {
		return nil
	}
	read := func(ctx context.Context) (pause.Reading, error) {
		ctx, cancel := context.WithTimeout(ctx, receiveTimeout)
		defer cancel()
		// As a receive: a refused connection fails now, not after the
		// SDK's retries, and the receive after meets it itself.
		st, err := p.PauseState(failFastRefused(ctx))
		if err != nil {
			l.log.Warn("reading whether the queue is paused failed", "err", err)
		}
		return pause.Reading{State: pause.State(st), ServiceNow: serviceTime(l.caps)}, err
	}
	return pause.New(l.opts.Scaling.ScaleInterval, read, time.Now)
}

// awaitUnpaused holds a dequeuer while the source is paused; it reports
// false if ctx ended first.
func (l *Listener[T]) awaitUnpaused(ctx context.Context) bool {
	if l.paused == nil {
		return true
	}
	err := l.paused.Wait(ctx, func(st pause.State) {
		l.log.Info("the queue is paused: receiving nothing until it ends or is resumed",
			"until", st.Until, "by", st.By)
	})
	return err == nil
}

// pausedMeanwhile reports whether the source is paused now, reading it
// first if the last reading is a scale interval old: for a dequeuer that
// passed the gate and then waited for slots, however long.
func (l *Listener[T]) pausedMeanwhile(ctx context.Context) bool {
	if l.paused == nil {
		return false
	}
	_, on := l.paused.Holds(ctx)
	return on
}

// Paused returns the source's pause as the listener last read it, and
// whether it holds now: while it does the listener receives nothing, and
// [Listener.Ready] stays nil (a pause is a state, not a failure). It makes
// no request.
func (l *Listener[T]) Paused() (PauseState, bool) {
	if l.paused == nil {
		return PauseState{}, false
	}
	st, on := l.paused.State()
	return PauseState(st), on
}

// readDepth reads the source's depth for scaling, and its pause with it
// when one request gives both (a [*Queue]'s Get Queue Properties): a busy
// listener then pays nothing to learn of a pause.
func (l *Listener[T]) readDepth(ctx context.Context) (int, error) {
	if l.caps.depthPaused == nil || l.paused == nil {
		return l.src.Depth(ctx)
	}
	depth, st, err := l.caps.depthPaused(ctx)
	if errors.Is(err, pause.ErrMalformed) {
		l.log.Warn("the queue's pause entry does not read; taken as no pause", "err", err)
		err = nil
	}
	if err == nil {
		l.paused.Saw(pause.Reading{State: pause.State(st), ServiceNow: serviceTime(l.caps)}, time.Now())
	}
	return depth, err
}

// DepthAndPause reads src's depth and, if it is a [Pauser], its pause:
// one Get Queue Properties for a [*Queue], whose answer holds both; for
// another source its Depth, then its PauseState. A pause entry this
// package did not write is taken as none. The error is the first request's
// that failed.
func DepthAndPause(ctx context.Context, src Source) (int, PauseState, error) {
	c := CapabilitiesOf(src)
	if c.depthPaused != nil {
		depth, st, err := c.depthPaused(ctx)
		if errors.Is(err, pause.ErrMalformed) {
			err = nil
		}
		return depth, st, err
	}
	depth, err := src.Depth(ctx)
	if err != nil || c.Pauser == nil {
		return depth, PauseState{}, err
	}
	st, err := c.Pauser.PauseState(ctx)
	return depth, st, err
}

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
// lease, and a waiting contender takes it at its next try: a contender
// that released the lease waits one and a half [LeaseOptions.AcquireEvery]
// before its next Run tries to take it again, so that one calling Run in a
// loop does not starve the others.
//
// None of that stops a holder that is paused (not running at all) past its
// lease from resuming and writing after its successor started: give every
// such write the holder's fence, which [LeaseFence] reads from the function's
// context, and have the storage refuse a write with an older fence than the
// data's.
type Lease struct {
	c  *lease.Contender
	tx counter
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
	l := &Lease{}
	// Every request of the lease is counted in its own Transactions too;
	// fn's are not, as its context does not pass through here.
	var b blobs.Backend = blobs.NewAzure(svc.NewContainerClient(c.Container), c.Container, func(ctx context.Context, o blobs.Op) context.Context {
		return tagBlob(countIn(ctx, &l.tx), Op(o))
	})
	b = blobs.Described(b, func(o blobs.Op, blob string, err error) error {
		return blobError(Op(o), c.Container+"/"+blob, err)
	})
	l.c = lease.New(b, name, lease.Options{
		Duration: c.Duration, RenewEvery: c.RenewEvery, AcquireEvery: c.AcquireEvery, Logger: c.Logger,
		Lost: ErrOwnershipLost,
	})
	return l, nil
}

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
	return l.c.Run(ctx, func(ctx context.Context, fence int64) error {
		return fn(context.WithValue(ctx, leaseFenceKey{}, fence))
	})
}

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
