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
		tr.ctx, tr.end = context.WithCancelCause(context.Background())
		return tr
	}
	slow, quick := newTry(), newTry()
	w.addTry(slow)
	w.addTry(quick)
	assert.Nil(t, w.removeTry(quick), "settled before its renewal: no renewer")

	c := &handlerCall{Context: slow.ctx, try: slow}
	w.addCall(c)
	deadline, ok := c.Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(80*time.Millisecond), deadline, 50*time.Millisecond)

	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not timed out")
	}
	assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, context.Cause(c), ErrHandlerTimeout)
	assert.ErrorIs(t, context.Cause(slow.ctx), ErrHandlerTimeout, "the whole try ends")

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []*try{slow}, renewed, "only the try still in hand")
}
