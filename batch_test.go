package azdispatch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// itemTally counts handler calls per item index of batches of jobs.
func TestBatchRoundTripsThroughTheListener(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 1000} {
		q := testQueue(t)
		p, err := NewPublisher[job](q, nil)
		require.NoError(t, err)
		items := make([]job, n)
		for i := range items {
			items[i] = job{N: i}
		}
		sent, err := p.SendBatch(context.Background(), items)
		require.NoError(t, err)
		c := newTally()
		l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
			if m.BatchID != sent.BatchID || m.Item != m.Body.N {
				t.Errorf("item %d carries batch %q item %d", m.Body.N, m.BatchID, m.Item)
			}
			return nil
		}), quick())
		require.NoError(t, err)
		stop := started(t, l)
		waitFor(t, "every item handled", func() bool { return c.succeeded() == n })
		waitFor(t, "message deleted", func() bool { return l.State().Succeeded == 1 })
		require.NoError(t, stop())
		c.assertEachSucceededOnce(t, n, 0)
		s := l.State()
		assertSettled(t, s)
		assert.EqualValues(t, n, s.ItemsSucceeded)
		t.Logf("n=%d listener tx %+v", n, s.Transactions)
	}
}
