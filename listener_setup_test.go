package azdispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// testBundle is the rig most tests of a listener need, in the manner of
// river's testBundle: a memqueue queue on a manual clock, a publisher on
// it, and a handler that records its calls. Time passes on the queue only
// when the test advances the clock, so tests of delays and retries take
// milliseconds and do not race the machine's clock.
type testBundle struct {
	t       *testing.T
	ctx     context.Context
	clock   *memqueue.ManualClock
	queue   *memqueue.Queue
	pub     *azdispatch.Publisher[string]
	handled *handled
}

// bundleStart is where a bundle's clock starts: a fixed time, so that a
// failure replays with the same times.
var bundleStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// setup returns a bundle whose queue is named for the test, with its
// clock at bundleStart. Start a listener on it with listen.
func setup(t *testing.T) *testBundle {
	t.Helper()
	clock := memqueue.NewManualClock(bundleStart)
	q := memqueue.New(queueNameOf(t), &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	return &testBundle{t: t, ctx: context.Background(), clock: clock, queue: q, pub: pub, handled: &handled{}}
}

// listen starts a listener on the bundle's queue whose handler records
// each call and returns fail (nil: it succeeds). Nil opts, or a zero Scaling.Idle,
// polls often (quickIdle): on a manual clock the listener should see each
// step soon. The listener stops when the test ends; stop stops it sooner
// and returns Run's result.
func (b *testBundle) listen(fail error, opts *azdispatch.ListenerOptions) (l *azdispatch.Listener[string], stop func() error) {
	b.t.Helper()
	var o azdispatch.ListenerOptions
	if opts != nil {
		o = *opts
	}
	if o.Scaling.Idle == nil {
		o.Scaling.Idle = quickIdle
	}
	l, err := azdispatch.NewListener(b.queue, b.handled.handler(b.queue, fail), &o)
	require.NoError(b.t, err)
	return l, running(b.t, l)
}

// queueNameOf is a queue name made from the test's name: lower case
// letters, digits and single dashes, at most 63 characters, as the service
// takes them.
func queueNameOf(t *testing.T) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[len(name)-63:], "-")
		name = strings.TrimLeft(name, "-")
	}
	return name
}
