package syncx

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDueTimesShortenTheIdleWaitOncePerRelease(t *testing.T) {
	t.Parallel()
	var d DueTimes
	now := time.Now()
	assert.Equal(t, 10*time.Second, d.Limit(now, 10*time.Second), "nothing due")
	d.Add(now.Add(2 * time.Second))
	d.Add(now.Add(-time.Second)) // already past
	d.Add(now.Add(20 * time.Second))
	assert.Equal(t, 2*time.Second, d.Limit(now, 10*time.Second))
	assert.Equal(t, 10*time.Second, d.Limit(now, 10*time.Second), "that wake-up was used")
	assert.Equal(t, 5*time.Second, d.Limit(now.Add(15*time.Second), 10*time.Second))
	for range maxDue + 10 {
		d.Add(now.Add(time.Hour))
	}
	assert.Len(t, d.h, maxDue, "bounded")
}
