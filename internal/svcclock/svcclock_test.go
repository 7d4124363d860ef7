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
