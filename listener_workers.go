package azdispatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// workerIdle is about how long a handler goroutine with nothing to do waits
// for the next message before it stops (between one and two of these).
const workerIdle = 5 * time.Second

// work is one received message for a handler goroutine, with the slot it
// gives back to its dequeuer once it is settled. A work with no message
// tells the goroutine that takes it to stop.
type work struct {
	d     *Delivery
	slots *syncx.Slots
	// received is when the receive that brought d was asked for, and took
	// how long it took to return: the service hid d at some moment between.
	received time.Time
	took     time.Duration
	// turn is when d may start under the rate limit; zero without one.
	turn time.Time
}

// workers are the session's handler goroutines. They are reused because a
// new goroutine per message grows its stack afresh each time the message's
// call chain gets deep (runtime.copystack), which cost more CPU than all
// the rest of the listener's work on a message. A goroutine waits for its
// next message on one channel receive, with no timer of its own: the watch
// retires those that stay idle (see retireIdle).
type workers struct {
	ch   chan work
	idle atomic.Int64 // goroutines waiting on ch now

	mu         sync.Mutex // orders retireIdle's sends before close
	closed     bool
	idleBefore int64 // how many waited at the previous look
}

// hand gives w to an idle handler goroutine, or starts one.
func (l *Listener[T]) hand(s *session, w work) {
	select {
	case s.workers.ch <- w:
	default:
		s.handlers.Go(func() { l.worker(s, w) })
	}
}

// worker handles w, then whatever else is handed to it, until it is told to
// stop or the channel is closed at the end of the session.
func (l *Listener[T]) worker(s *session, w work) {
	for {
		l.process(s, w) // gives back w's slot, whatever becomes of its goroutine
		s.workers.idle.Add(1)
		w = <-s.workers.ch
		s.workers.idle.Add(-1)
		if w.d == nil {
			return
		}
	}
}

// retireIdle stops as many handler goroutines as were idle both now and at
// the previous look, workerIdle ago: a listener that has been quiet keeps
// none, and a busy one keeps those it keeps using. It is called every
// workerIdle by the watch.
func (w *workers) retireIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	now := w.idle.Load()
	n := min(now, w.idleBefore)
	w.idleBefore = now - n
	for range n {
		select {
		case w.ch <- work{}:
		default: // it took work meanwhile; it may go next time
			return
		}
	}
}

// close tells every waiting handler goroutine to stop, and those still
// working to stop once they are done. Only once no dequeuer is left, since
// a dequeuer hands work on the channel.
func (w *workers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	close(w.ch)
}
