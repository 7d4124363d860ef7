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
	assert.Equal(t, 10*time.Second, limit(&d, now, 10*time.Second), "nothing due")
	d.Add(now.Add(2 * time.Second))
	d.Add(now.Add(20 * time.Second))
	assert.Equal(t, 2*time.Second, limit(&d, now, 10*time.Second), "one waiter is sent to it")
	assert.Equal(t, 10*time.Second, limit(&d, now, 10*time.Second), "one is on its way: the others wait as they would")
	assert.Equal(t, time.Second, limit(&d, now, time.Second), "a shorter wait of their own stays")
	assert.Equal(t, 10*time.Second, limit(&d, now.Add(2500*time.Millisecond), 10*time.Second),
		"past, and the one sent may still be looking")
	assert.Zero(t, limit(&d, now.Add(3*time.Second), 10*time.Second), "past, the one sent long ago is taken to have stopped: look now")

	d.Covered(now.Add(time.Second))
	next, ok := d.Next()
	require.True(t, ok)
	assert.Equal(t, now.Add(2*time.Second), next, "a receive before it does not cover it")
	d.Covered(now.Add(2 * time.Second))
	next, ok = d.Next()
	require.True(t, ok)
	assert.Equal(t, now.Add(20*time.Second), next, "covered by a receive that started at it")
	assert.Equal(t, 18*time.Second, limit(&d, now.Add(2*time.Second), time.Minute), "the next time gets a waiter of its own")
}

// An earlier time than the one a waiter was sent to gets a waiter of its
// own; the later one is looked for by whoever comes back first.
func TestDueTimesSendAWaiterToAnEarlierTime(t *testing.T) {
	t.Parallel()
	var d DueTimes
	now := time.Now()
	d.Add(now.Add(5 * time.Second))
	assert.Equal(t, 5*time.Second, limit(&d, now, time.Minute))
	d.Add(now.Add(2 * time.Second))
	assert.Equal(t, 2*time.Second, limit(&d, now, time.Minute), "earlier than the one a waiter was sent to")
	assert.Equal(t, time.Minute, limit(&d, now, time.Minute))
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

// A full DueTimes keeps near times exact: a listener holding a thousand
// delayed messages hidden for a week still comes back for a retry due in
// a second, and still for the week-long ones, at the latest.
func TestDueTimesKeepNearTimesWhenFullOfFarOnes(t *testing.T) {
	t.Parallel()
	var d DueTimes
	now := time.Now()
	week := 7 * 24 * time.Hour
	for i := range maxDue + 10 {
		d.Add(now.Add(week + time.Duration(i)*time.Second))
	}
	d.Add(now.Add(time.Second))
	next, ok := d.Next()
	require.True(t, ok)
	assert.Equal(t, now.Add(time.Second), next, "the retry is looked for when due")
	assert.Equal(t, now.Add(week+time.Duration(maxDue+9)*time.Second), d.h[d.h.latest()], "the last hop is still covered")
	assert.Len(t, d.h, maxDue)
}

// limit is Limit for a caller that was sent nowhere before.
func limit(d *DueTimes, now time.Time, delay time.Duration) time.Duration {
	wait, _ := d.Limit(now, delay, time.Time{})
	return wait
}

// A waiter that comes back before its time is sent again; one that will
// not go releases its time, and another is sent at once.
func TestDueTimesSendTheSameWaiterAgainOrAnother(t *testing.T) {
	t.Parallel()
	var d DueTimes
	now := time.Now()
	d.Add(now.Add(5 * time.Second))
	wait, held := d.Limit(now, time.Minute, time.Time{})
	assert.Equal(t, 5*time.Second, wait)
	wait, held = d.Limit(now.Add(time.Second), time.Minute, held)
	assert.Equal(t, 4*time.Second, wait, "woken early, it is sent again")
	assert.Equal(t, time.Minute, limit(&d, now.Add(time.Second), time.Minute), "another is not")
	d.Release(held)
	assert.Equal(t, 4*time.Second, limit(&d, now.Add(time.Second), time.Minute), "released: another is sent")
}
