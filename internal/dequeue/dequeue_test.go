package dequeue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// What a dequeuer does after a receive depends on nothing but what it
// learnt from it: no storage, no goroutine, no clock.
func TestNextStepAfterAReceive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   After
		want Step
	}{
		{"a full batch scales up and receives again", After{Asked: 32, Got: 32, Idle: 3}, Step{Kind: ScaleUp}},
		{"a full batch the rate limit cut receives again without scaling", After{Asked: 5, Got: 5, Limited: true, Idle: 2}, Step{Kind: Receive}},
		{"a partial batch waits, its idle streak reset", After{Asked: 32, Got: 7, Idle: 4}, Step{Kind: Wait}},
		{"a partial batch with dequeuers to spare retires one", After{Asked: 32, Got: 7, Surplus: true}, Step{Kind: Wait, Retire: true}},
		{"the first empty receive drains", After{Asked: 32}, Step{Kind: Idle, Idle: 1, Drained: true}},
		{"a later empty receive lengthens the streak", After{Asked: 32, Idle: 2}, Step{Kind: Idle, Idle: 3}},
		{"an empty receive with dequeuers to spare retires one", After{Asked: 32, Idle: 2, Surplus: true}, Step{Kind: Idle, Idle: 3, Retire: true}},
		{"stopping stops", After{Asked: 32, Got: 32, Stopping: true, Idle: 1}, Step{Kind: Stop, Idle: 1}},
		{"a failure backs off, min first", After{Asked: 32, Failed: true, Failures: 1, Idle: 2}, Step{Kind: BackOff, Delay: 200 * time.Millisecond, Idle: 2}},
		{"a failure backs off longer each time", After{Asked: 32, Failed: true, Failures: 3, Jitter: 0.5}, Step{Kind: BackOff, Delay: time.Second}},
		{"the back-off is capped", After{Asked: 32, Failed: true, Failures: 40, Jitter: 0.5}, Step{Kind: BackOff, Delay: 30 * time.Second}},
		{"the service's Retry-After wins", After{Asked: 32, Failed: true, RetryAfter: time.Minute, Failures: 1}, Step{Kind: BackOff, Delay: time.Minute}},
		{"a failure while stopping still backs off (the wait ends at once)", After{Asked: 32, Got: 3, Failed: true, Failures: 1, Stopping: true, Jitter: 0.5},
			Step{Kind: BackOff, Delay: 250 * time.Millisecond}},
		{"no turns pauses", After{NoTurns: true, Idle: 2}, Step{Kind: Pause, Delay: time.Second, Idle: 2}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Next(tt.in), tt.name)
	}
}
