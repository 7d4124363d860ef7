package azdispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch/internal/pause"
)

// A QueueSet's listener honours a pause of any of its queues (see
// [Pauser]): the set reads each queue's pause at most once per
// setPauseEvery, and reads no message from a queue while it is paused,
// while the others go on. A queue's pause read fails, hangs or finds the
// queue backed off as its receives would: the set goes on by what it last
// read of it.

// setPauseEvery is how often a set reads each of its queues' pauses: the
// scale interval a listener reads a single queue's pause by, by default.
const setPauseEvery = 10 * time.Second

// errBackedOff is the read of the pause of a queue that is backed off: not
// asked, so what was read before stands.
var errBackedOff = errors.New("backed off")

// newSetPauses returns a gate for each of set's shards that can be paused.
func newSetPauses(set *shardSet) []*pause.Gate {
	gates := make([]*pause.Gate, len(set.shards))
	for i := range set.shards {
		p := set.caps[i].Pauser
		if p == nil {
			continue
		}
		read := func(ctx context.Context) (pause.Reading, error) {
			if !set.admit(i, set.now()) {
				return pause.Reading{}, errBackedOff
			}
			var st PauseState
			// Within the queue's try timeout, as its receives: a hung
			// account holds up one receive of the set, once per interval.
			err := set.try(ctx, i, 0, false, func(ctx context.Context) (err error) {
				st, err = p.PauseState(ctx)
				return err
			})
			return pause.Reading{State: pause.State(st), ServiceNow: serviceTime(set.caps[i])}, err
		}
		gates[i] = pause.New(setPauseEvery, read, time.Now)
	}
	return gates
}

// pausedNow returns, by queue, whether its pause holds, reading at once
// those whose last reading is stale; nil if none holds.
func (g *generation) pausedNow(ctx context.Context) []bool {
	var wg sync.WaitGroup
	for _, gate := range g.pauses {
		if gate != nil && gate.Stale() {
			wg.Go(func() { gate.Holds(ctx) })
		}
	}
	wg.Wait()
	var paused []bool
	for i, gate := range g.pauses {
		if gate == nil {
			continue
		}
		if _, on := gate.State(); on {
			if paused == nil {
				paused = make([]bool, len(g.pauses))
			}
			paused[i] = true
		}
	}
	return paused
}

// pauseOf is queue i's pause as last read, if it holds.
func (g *generation) pauseOf(i int) PauseState {
	if g.pauses == nil || g.pauses[i] == nil {
		return PauseState{}
	}
	st, on := g.pauses[i].State()
	if !on {
		return PauseState{}
	}
	return PauseState(st)
}
