package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
)

// Throughput is measured between samples, over at most the window, and
// says over how long.
func TestRateSamples(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var r rateSamples
	assert.Equal(t, "—", r.add(t0, 0), "a first sample measures nothing")
	assert.Equal(t, "—", r.add(t0.Add(500*time.Millisecond), 10), "under a second: nothing yet")
	assert.Equal(t, "10.0 /s over 10 s", r.add(t0.Add(10*time.Second), 100))
	assert.Equal(t, "0 /s over 20 s", func() string {
		var q rateSamples
		q.add(t0, 5)
		return q.add(t0.Add(20*time.Second), 5)
	}())
	// Sampled every minute for ten: the rate is over the last five or so.
	var w rateSamples
	for i := range 11 {
		w.add(t0.Add(time.Duration(i)*time.Minute), int64(i)*60)
	}
	assert.Equal(t, "1.00 /s over 5 min 0 s", w.add(t0.Add(10*time.Minute), 600))
	assert.Equal(t, "—", w.add(t0.Add(11*time.Minute), 1), "a count that went down measures nothing")
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		l     Stater
		s     azdispatch.State
		state string
	}{
		{"busy", nil, azdispatch.State{ActiveDequeuers: 2, IdleDequeuers: 1, InFlight: 3}, stateRunning},
		{"idle", nil, azdispatch.State{ActiveDequeuers: 1, IdleDequeuers: 1}, stateIdle},
		{"no dequeuer, unknown", nil, azdispatch.State{}, stateNoDeq},
		{"fatal", nil, azdispatch.State{Fatal: assertErr}, stateFatal},
		{"stopped", readyFunc(func() error { return notRunning }), azdispatch.State{}, stateStopped},
		{"failing", readyFunc(func() error { return failing }), azdispatch.State{ActiveDequeuers: 1}, stateFailing},
		{"running, none woken", readyFunc(func() error { return nil }), azdispatch.State{}, stateIdle},
	} {
		l := c.l
		if l == nil {
			l = StateFunc(func() azdispatch.State { return c.s })
		}
		got, _ := classify(l, c.s)
		assert.Equal(t, c.state, got, c.name)
	}
}

type readyFunc func() error

func (f readyFunc) State() azdispatch.State { return azdispatch.State{} }
func (f readyFunc) Ready() error            { return f() }

var (
	assertErr  = errString("refused")
	notRunning = wrapNotReady("not running")
	failing    = wrapNotReady("3 receives failed in a row")
)

type errString string

func (e errString) Error() string { return string(e) }

type notReady struct{ why string }

func (e notReady) Error() string        { return azdispatch.ErrNotReady.Error() + ": " + e.why }
func (e notReady) Is(target error) bool { return target == azdispatch.ErrNotReady }

func wrapNotReady(why string) error { return notReady{why} }
