package azdispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Against the service, a listener whose clock is six hours ahead reports
// the true time in queue: both ends are the service's (the insertion time,
// and the Date of the receive's answer), so no local clock enters. A
// message sent with a delay waits from its due time.
func TestTimeInQueueAgainstTheServiceIgnoresAListenersSkewedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	pub, err := NewPublisher[string](q, nil)
	require.NoError(t, err)
	_, err = pub.Send(ctx, "now")
	require.NoError(t, err)
	_, err = pub.SendAfter(ctx, "later", 2*time.Second)
	require.NoError(t, err)
	sent := time.Now()
	time.Sleep(4 * time.Second) // whole seconds: "now" waits at least 3

	var mu sync.Mutex
	got := map[string]time.Duration{}
	l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
		mu.Lock()
		got[m.Body] = m.TimeInQueue
		mu.Unlock()
		return nil
	}, quick())
	require.NoError(t, err)
	l.clock = func() time.Time { return time.Now().Add(6 * time.Hour) }
	stop := started(t, l)
	waitFor(t, "both handled", func() bool { return l.State().Succeeded == 2 })
	require.NoError(t, stop())
	// At most the time since the send, on any machine: the service's
	// seconds may add one.
	bound := time.Since(sent) + 2*time.Second
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, got["now"], 3*time.Second)
	assert.LessOrEqual(t, got["now"], bound)
	// Both were visible when the listener started, so its first receive
	// brought both: "later" waited from two seconds after its send.
	assert.LessOrEqual(t, got["later"], got["now"]-time.Second, "from its due time")
	assert.Equal(t, got["now"].Truncate(time.Second), got["now"], "whole seconds, as the service gives them")
	s := l.State()
	assert.Equal(t, int64(2), s.TimeInQueue.Count)

	// The front's age reads the same clocks.
	_, err = pub.Send(ctx, "front")
	require.NoError(t, err)
	time.Sleep(2 * time.Second)
	age, err := OldestAge(ctx, q)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, age, time.Second)
	assert.Less(t, age, time.Hour)
}
