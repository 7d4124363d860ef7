package syncx

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSignalBroadcastWakesEveryWaiterOnce(t *testing.T) {
	t.Parallel()
	s := NewSignal()
	ch1 := s.Current()
	ch2 := s.Current()
	assert.False(t, IsClosed(ch1))
	s.Broadcast()
	assert.True(t, IsClosed(ch1))
	assert.True(t, IsClosed(ch2))
	ch3 := s.Current()
	assert.False(t, IsClosed(ch3), "a new wait is not woken by an old broadcast")
}
