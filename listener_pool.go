package azdispatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// tryIdle is about how long a try goroutine with nothing to do waits for
// the next message before it stops (between one and two of these).
const tryIdle = 5 * time.Second

// arrival is one received message for a try goroutine, with the slot it
// gives back to its dequeuer once it is settled. An arrival with no message
// tells the goroutine that takes it to stop.
type arrival struct {
	d     *Delivery
	slots *syncx.Slots
	// received is when the receive that brought d was asked for, and took
	// how long it took to return: the service hid d at some moment between.
	received time.Time
	took     time.Duration
	// turn is when d may start under the rate limit; zero without one.
	turn time.Time
}

// tryPool holds the session's try goroutines, which take each message
// through its try and its settling, handler call included. They are reused because a
// new goroutine per message grows its stack afresh each time the message's
// call chain gets deep (runtime.copystack), which cost more CPU than all
// the rest of the listener's work on a message. A goroutine waits for its
// next message on one channel receive, with no timer of its own: the watch
// retires those that stay idle (see retireIdle).
type tryPool struct {
	ch   chan arrival
	idle atomic.Int64 // goroutines waiting on ch now

	mu         sync.Mutex // orders retireIdle's sends before close
	closed     bool
	idleBefore int64 // how many waited at the previous look
}

// startTry gives r to an idle try goroutine, or starts one.
func (l *Listener[T]) startTry(s *session, r arrival) {
	select {
	case s.tries.ch <- r:
	default:
		s.handlers.Go(func() { l.tryLoop(s, r) })
	}
}

// tryLoop takes r through its try, then whatever else is given to it, until
// it is told to stop or the channel is closed at the end of the session.
func (l *Listener[T]) tryLoop(s *session, r arrival) {
	for {
		l.tryDelivery(s, r) // gives back r's slot, whatever becomes of its goroutine
		s.tries.idle.Add(1)
		r = <-s.tries.ch
		s.tries.idle.Add(-1)
		if r.d == nil {
			return
		}
	}
}

// retireIdle stops as many try goroutines as were idle both now and at
// the previous look, tryIdle ago: a listener that has been quiet keeps
// none, and a busy one keeps those it keeps using. It is called every
// tryIdle by the watch.
func (w *tryPool) retireIdle() {
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
		case w.ch <- arrival{}:
		default: // it took work meanwhile; it may go next time
			return
		}
	}
}

// close tells every waiting try goroutine to stop, and those still
// working to stop once they are done. Only once no dequeuer is left, since
// a dequeuer gives messages on the channel.
func (w *tryPool) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	close(w.ch)
}
