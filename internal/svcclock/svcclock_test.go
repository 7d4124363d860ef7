package svcclock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAClockThatSawNothingReadsTheLocalOne(t *testing.T) {
	t.Parallel()
	var c Clock
	assert.False(t, c.Known())
	assert.WithinDuration(t, time.Now(), c.Now(), time.Second)
	c.Saw(nil)
	assert.False(t, c.Known(), "a missing Date tells nothing")
}

// A service two hours ahead is read two hours ahead, never later than it
// is: the Date's second is its lower end.
func TestAClockFollowsTheServicesDate(t *testing.T) {
	t.Parallel()
	var c Clock
	local := time.Now()
	date := local.Add(2 * time.Hour).Truncate(time.Second)
	c.saw(&date, local)
	assert.True(t, c.Known())
	got := c.Now().Sub(time.Now())
	assert.InDelta(t, float64(2*time.Hour), float64(got), float64(time.Second+100*time.Millisecond))
	assert.LessOrEqual(t, got, 2*time.Hour+100*time.Millisecond, "not ahead of the service")
}

func TestTheClosestDateIsKept(t *testing.T) {
	t.Parallel()
	var c Clock
	base := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	local := base.Add(-time.Hour) // this machine runs an hour behind
	// The service's time is base+0.9 s when the first answer leaves: its
	// Date says base.
	c.saw(&base, local.Add(900*time.Millisecond))
	// An answer just after the next second turned: the closest.
	next := base.Add(time.Second)
	c.saw(&next, local.Add(1010*time.Millisecond))
	// An answer late in that second says less: not kept.
	c.saw(&next, local.Add(1900*time.Millisecond))
	assert.Equal(t, time.Hour-10*time.Millisecond, time.Duration(c.offset.Load()))
	// A clock set back by a minute is followed.
	back := base.Add(-time.Minute)
	c.saw(&back, local.Add(2*time.Second))
	assert.Equal(t, time.Hour-62*time.Second, time.Duration(c.offset.Load()))
}
