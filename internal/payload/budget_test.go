package payload

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// At GOGC 100 a budget of memory lets half of it be held live; a take of
// more than that takes all of it; a take that must wait ends with its
// context; what is given back can be taken again.
func TestBudgetHoldsBackTheCollectorsHeadroom(t *testing.T) {
	b := NewBudget(1000, 100)
	n, ok := b.TryTake(300)
	require.True(t, ok)
	assert.EqualValues(t, 300, n)
	_, ok = b.TryTake(300)
	assert.False(t, ok, "only 500 may be held live")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := b.Take(ctx, 300)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	b.Give(n)
	assert.Zero(t, b.Held())
	n, err = b.Take(context.Background(), 5000)
	require.NoError(t, err)
	assert.EqualValues(t, 500, n, "more than the budget takes all of it")
	b.Give(n)
}

func TestNoBudgetBoundsNothing(t *testing.T) {
	b := NewBudget(0, 100)
	n, ok := b.TryTake(1 << 40)
	assert.True(t, ok)
	assert.Zero(t, n)
	b.Give(n)
	assert.Zero(t, b.Held())
	assert.Positive(t, GCPercent()+1)
}
