package memqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/pause"
)

// opSetMetadata is a write of the queue's metadata (a pause), which the
// service bills as "other".
const opSetMetadata azdispatch.Op = "set metadata"

var _ azdispatch.Pauser = (*Queue)(nil)

// Pause pauses the queue's listeners for d on the queue's clock (see
// [azdispatch.Pauser]): a read and a write, as against the service, each
// counted and open to the fault hooks (the read as OpDepth, the write as
// Other).
func (q *Queue) Pause(ctx context.Context, d time.Duration, opts *azdispatch.PauseOptions) (azdispatch.PauseState, error) {
	var by string
	if opts != nil {
		by = opts.By
	}
	switch {
	case d <= 0:
		return azdispatch.PauseState{}, fmt.Errorf("memqueue: pause of %v; need more than 0", d)
	case d > pause.MaxFor:
		return azdispatch.PauseState{}, fmt.Errorf("memqueue: pause of %v; at most 100 years", d)
	case len(by) > pause.MaxBy:
		return azdispatch.PauseState{}, fmt.Errorf("memqueue: PauseOptions.By of %d bytes; at most %d", len(by), pause.MaxBy)
	}
	if _, err := q.PauseState(ctx); err != nil {
		return azdispatch.PauseState{}, err
	}
	// The queue's clock is exact, not a lower bound as a client's of the
	// service is: the end, rounded up to the second, is at least d away.
	now := q.clock.Now()
	st := pause.State{Since: reported(now), Until: reported(now.Add(d + time.Second - 1)), By: by}
	if err := q.setPause(ctx, st); err != nil {
		return azdispatch.PauseState{}, err
	}
	return azdispatch.PauseState(st), nil
}

// Resume ends the queue's pause (see [azdispatch.Pauser]): a read, and a
// write if it was paused.
func (q *Queue) Resume(ctx context.Context) error {
	if err := q.before(ctx, azdispatch.OpDepth); err != nil {
		return err
	}
	q.mu.Lock()
	paused := q.pause != (pause.State{})
	q.mu.Unlock()
	if !paused {
		return nil
	}
	return q.setPause(ctx, pause.State{})
}

// PauseState reads the queue's pause (see [azdispatch.Pauser]): one call,
// counted as a depth read; the zero state once it has ended.
func (q *Queue) PauseState(ctx context.Context) (azdispatch.PauseState, error) {
	if err := q.before(ctx, azdispatch.OpDepth); err != nil {
		return azdispatch.PauseState{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lost(azdispatch.OpDepth) {
		return azdispatch.PauseState{}, q.lostError(azdispatch.OpDepth)
	}
	if !q.pause.ActiveAt(q.clock.Now()) {
		return azdispatch.PauseState{}, nil
	}
	return azdispatch.PauseState(q.pause), nil
}

func (q *Queue) setPause(ctx context.Context, st pause.State) error {
	if err := q.before(ctx, opSetMetadata); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pause = st
	if q.lost(opSetMetadata) {
		return q.lostError(opSetMetadata)
	}
	return nil
}
