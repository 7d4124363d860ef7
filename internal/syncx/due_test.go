package syncx

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDueTimesLimitAWaitUntilAReceiveCoversThem(t *testing.T) {
	t.Parallel()
	var d DueTimes
	now := time.Now()
	assert.Equal(t, 10*time.Second, d.Limit(now, 10*time.Second), "nothing due")
	d.Add(now.Add(2 * time.Second))
	d.Add(now.Add(20 * time.Second))
	assert.Equal(t, 2*time.Second, d.Limit(now, 10*time.Second))
	assert.Equal(t, 2*time.Second, d.Limit(now, 10*time.Second), "still due: no receive has covered it")
	assert.Zero(t, d.Limit(now.Add(3*time.Second), 10*time.Second), "past and not covered: look now")

	d.Covered(now.Add(time.Second))
	assert.Equal(t, 2*time.Second, d.Limit(now, 10*time.Second), "a receive before it does not cover it")
	d.Covered(now.Add(2 * time.Second))
	assert.Equal(t, 10*time.Second, d.Limit(now, 10*time.Second), "covered by a receive that started at it")
	next, ok := d.Next()
	require.True(t, ok)
	assert.Equal(t, now.Add(20*time.Second), next)
}

func TestDueTimesTellWhenTheEarliestChanges(t *testing.T) {
	t.Parallel()
	var d DueTimes
	changed := d.Changed()
	now := time.Now()
	d.Add(now.Add(time.Minute))
	assert.Len(t, changed, 1, "a first time is the earliest")
	<-changed
	d.Add(now.Add(time.Hour))
	assert.Empty(t, changed, "a later time changes nothing a waiter needs")
	d.Add(now.Add(time.Second))
	assert.Len(t, changed, 1)
}

// Past its bound a DueTimes still keeps, for every time it was given, a
// time at or after it: no message is forgotten, some are looked for later.
func TestDueTimesPastTheirBoundKeepATimeAtOrAfterEveryOne(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 0))
	var d DueTimes
	start := time.Now()
	var given []time.Time
	for range 5 * maxDue {
		at := start.Add(time.Duration(r.Int64N(int64(time.Hour))))
		given = append(given, at)
		d.Add(at)
	}
	assert.Len(t, d.h, maxDue, "bounded")
	latest := d.h[d.h.latest()]
	for _, at := range given {
		assert.False(t, at.After(latest), "seed %d: %v is after every time kept", seed, at)
	}
	for i := range d.h {
		assert.False(t, d.h[i].Before(d.h[0]), "still a heap")
	}
}
