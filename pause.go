package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"github.com/azdispatch/azdispatch/internal/pause"
)

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
