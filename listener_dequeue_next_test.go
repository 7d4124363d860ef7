package azdispatch

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// What a dequeuer does after a receive depends on nothing but what it
// learnt from it: no storage, no goroutine, no clock.
func TestNextStepAfterAReceive(t *testing.T) {
	t.Parallel()
	busy := &StorageError{Op: OpReceive, RetryAfter: time.Minute, Err: errors.New("busy")}
	tests := []struct {
		name string
		in   afterReceive
		want step
	}{
		{"a full batch scales up and receives again", afterReceive{asked: 32, got: 32, idle: 3}, step{kind: stepScaleUp}},
		{"a full batch the rate limit cut receives again without scaling", afterReceive{asked: 5, got: 5, limited: true, idle: 2}, step{kind: stepReceive}},
		{"a partial batch waits, its idle streak reset", afterReceive{asked: 32, got: 7, idle: 4}, step{kind: stepWait}},
		{"a partial batch with dequeuers to spare retires one", afterReceive{asked: 32, got: 7, surplus: true}, step{kind: stepWait, retire: true}},
		{"the first empty receive drains", afterReceive{asked: 32}, step{kind: stepIdle, idle: 1, drained: true}},
		{"a later empty receive lengthens the streak", afterReceive{asked: 32, idle: 2}, step{kind: stepIdle, idle: 3}},
		{"an empty receive with dequeuers to spare retires one", afterReceive{asked: 32, idle: 2, surplus: true}, step{kind: stepIdle, idle: 3, retire: true}},
		{"stopping stops", afterReceive{asked: 32, got: 32, stopping: true, idle: 1}, step{kind: stepStop, idle: 1}},
		{"a failure backs off, min first", afterReceive{asked: 32, err: errors.New("x"), failures: 1, idle: 2}, step{kind: stepBackOff, delay: 200 * time.Millisecond, idle: 2}},
		{"a failure backs off longer each time", afterReceive{asked: 32, err: errors.New("x"), failures: 3, jitter: 0.5}, step{kind: stepBackOff, delay: time.Second}},
		{"the back-off is capped", afterReceive{asked: 32, err: errors.New("x"), failures: 40, jitter: 0.5}, step{kind: stepBackOff, delay: 30 * time.Second}},
		{"the service's Retry-After wins", afterReceive{asked: 32, err: busy, failures: 1}, step{kind: stepBackOff, delay: time.Minute}},
		{"a failure while stopping still backs off (the wait ends at once)", afterReceive{asked: 32, got: 3, err: errors.New("x"), failures: 1, stopping: true, jitter: 0.5},
			step{kind: stepBackOff, delay: 250 * time.Millisecond}},
		{"no turns pauses", afterReceive{noTurns: true, idle: 2}, step{kind: stepPause, delay: time.Second, idle: 2}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, nextStep(tt.in), tt.name)
	}
}
