package azdispatch

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchListStaysInDueOrder(t *testing.T) {
	t.Parallel()
	var l watchList
	base := time.Now()
	entries := make([]*watchEntry, 200)
	for i := range entries {
		// Mostly later than the last, sometimes a little earlier, as
		// messages of receives that overlapped come in.
		entries[i] = &watchEntry{due: base.Add(time.Duration(i*10-rand.IntN(30)) * time.Millisecond)}
		l.insert(entries[i])
	}
	for i := 0; i < len(entries); i += 3 {
		l.unlink(entries[i])
	}
	n := 0
	for e := l.head; e != nil; e = e.next {
		if e.next != nil {
			assert.False(t, e.next.due.Before(e.due), "in due order")
			assert.Same(t, e, e.next.prev)
		} else {
			assert.Same(t, e, l.tail)
		}
		n++
	}
	assert.Equal(t, 200-67, n)
}

// A try still in hand at half its visibility timeout has its renewals
// started; one settled before is never seen again. A call past
// HandlerTimeout ends its try, and its context says so.
func TestWatchRenewsLateTriesAndTimesOutCalls(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var renewed []*try
	w := newWatch(50*time.Millisecond, 80*time.Millisecond, func(t *try) {
		mu.Lock()
		renewed = append(renewed, t)
		mu.Unlock()
	})
	stop := make(chan struct{})
	var running sync.WaitGroup
	running.Go(func() { w.run(stop) })
	defer func() {
		close(stop)
		running.Wait()
	}()

	newTry := func() *try {
		tr := &try{received: time.Now()}
		tr.begin(context.Background())
		return tr
	}
	slow, quick := newTry(), newTry()
	w.addTry(slow)
	w.addTry(quick)
	assert.Nil(t, w.removeTry(quick), "settled before its renewal: no renewer")

	c := &handlerCall{}
	before := time.Now()
	w.startCall(slow, c, time.Now())
	after := time.Now()
	deadline, ok := c.Deadline()
	require.True(t, ok)
	// Bounded by the clock read around the call, so that a machine that
	// pauses the test between them cannot fail it.
	assert.WithinRange(t, deadline, before.Add(80*time.Millisecond), after.Add(80*time.Millisecond))

	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not timed out")
	}
	assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, context.Cause(c), ErrHandlerTimeout)
	assert.ErrorIs(t, context.Cause(slow.context()), ErrHandlerTimeout, "the whole try ends")

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []*try{slow}, renewed, "only the try still in hand")
}

// A HandlerTimeout shorter than the wait for the first renewal is watched
// from the call's start; a longer one is left with the try until its
// renewal comes due, and a call that returns before then is never filed.
func TestWatchFilesCallsOnlyWhenTheyCanTimeOut(t *testing.T) {
	t.Parallel()
	newTry := func() *try {
		tr := &try{received: time.Now()}
		tr.begin(context.Background())
		return tr
	}
	short := newWatch(time.Hour, time.Minute, func(*try) {})
	tr := newTry()
	short.addTry(tr)
	c := &handlerCall{}
	short.startCall(tr, c, time.Now())
	assert.NotNil(t, c.timer.in, "filed at once: it may time out before any renewal")
	short.endCall(tr, c)
	assert.Nil(t, c.timer.in)

	long := newWatch(time.Minute, time.Hour, func(*try) {})
	tr = newTry()
	long.addTry(tr)
	c = &handlerCall{}
	long.startCall(tr, c, time.Now())
	assert.Nil(t, c.timer.in, "left with its try")
	long.fire(time.Now().Add(2*time.Minute), nil) // the try's renewal comes due
	assert.NotNil(t, c.timer.in, "filed when the renewal came due")
	long.endCall(tr, c)
	assert.Nil(t, c.timer.in)
	assert.Nil(t, tr.call.Load())

	tr = newTry()
	long.addTry(tr)
	c = &handlerCall{}
	long.startCall(tr, c, time.Now())
	long.endCall(tr, c)
	long.fire(time.Now().Add(2*time.Minute), nil)
	assert.Nil(t, c.timer.in, "returned before the renewal: never filed")
}
