package syncx

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSubscribersWakeCallsEachOnceAndCancelRemoves(t *testing.T) {
	t.Parallel()
	var s Subscribers
	s.Wake() // no one subscribed: nothing to call

	var a, b atomic.Int32
	cancelA := s.Subscribe(func() { a.Add(1) })
	cancelB := s.Subscribe(func() { b.Add(1) })
	s.Wake()
	assert.EqualValues(t, 1, a.Load())
	assert.EqualValues(t, 1, b.Load())

	cancelA()
	s.Wake()
	assert.EqualValues(t, 1, a.Load(), "a cancelled subscriber is not called")
	assert.EqualValues(t, 2, b.Load())

	cancelA() // a second cancel is harmless
	cancelB()
	s.Wake()
	assert.EqualValues(t, 1, a.Load())
	assert.EqualValues(t, 2, b.Load())
}

func TestSubscribersAreSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	var s Subscribers
	var calls atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				cancel := s.Subscribe(func() { calls.Add(1) })
				s.Wake()
				cancel()
			}
		})
	}
	wg.Wait()
	assert.GreaterOrEqual(t, calls.Load(), int32(800), "every Wake called at least its own subscriber")
	calls.Store(0)
	s.Wake()
	assert.Zero(t, calls.Load(), "every subscriber was cancelled")
}

func TestSubscriberMaySubscribeFromItsCallback(t *testing.T) {
	t.Parallel()
	var s Subscribers
	var inner atomic.Int32
	s.Subscribe(func() { s.Subscribe(func() { inner.Add(1) }) })
	s.Wake() // must not deadlock
	s.Wake()
	assert.EqualValues(t, 1, inner.Load(), "the one subscribed during the first Wake is called by the second")
}
