package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/memqueue"
)

// handled records each handler call's message and the service's time it
// ran at.
type handled struct {
	mu    sync.Mutex
	calls []handledCall
}

type handledCall struct {
	m  azdispatch.Message[string]
	at time.Time // by the queue's clock
}

func (h *handled) handler(q *memqueue.Queue, fail error) azdispatch.Handler[string] {
	return func(_ context.Context, m *azdispatch.Message[string]) error {
		h.mu.Lock()
		h.calls = append(h.calls, handledCall{m: *m, at: q.ServiceTime()})
		h.mu.Unlock()
		return fail
	}
}

func (h *handled) get() []handledCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]handledCall(nil), h.calls...)
}

// quickIdle polls often: on a manual clock, time passes only when the test
// says, and the listener should see each step soon.
var quickIdle = azdispatch.ExponentialIdle(0, 20*time.Millisecond)

const week = 7 * 24 * time.Hour

// A message sent 400 days ahead is hidden again once a week until it is
// due, then handled once, on its first real delivery, within a second of
// its due time by the queue's clock. Each hop costs one Update Message and
// rides on a receive the listener makes anyway.
func TestAMessageFourHundredDaysAheadIsHandledOnceWhenDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock, q, h := b.clock, b.queue, b.handled
	s, err := b.pub.SendAfter(b.ctx, "renew", 400*24*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, clock.Now().Add(400*24*time.Hour), s.Due)

	l, _ := b.listen(nil, nil)

	hops := int64(0)
	for clock.Now().Add(week).Before(s.Due) {
		clock.Advance(week)
		hops++
		waitUntil(t, fmt.Sprintf("hop %d", hops), func() bool { return l.State().Rehidden == hops })
		require.Empty(t, h.get(), "handled before it was due")
	}
	// ceil(400/7) = 58 hidden periods: the send's own, then 57 hops.
	assert.Equal(t, int64(57), hops)
	clock.Advance(s.Due.Sub(clock.Now()) - time.Second)
	time.Sleep(50 * time.Millisecond) // a few receives: it must stay hidden
	require.Empty(t, h.get(), "handled a second before it was due")
	clock.Advance(time.Second)
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })

	calls := h.get()
	require.Len(t, calls, 1)
	assert.Equal(t, "renew", calls[0].m.Body)
	assert.Equal(t, int64(1), calls[0].m.DequeueCount, "hops are not tries")
	assert.WithinRange(t, calls[0].at, s.Due, s.Due.Add(time.Second), "within a second of its due time")

	tx := q.Transactions()
	received := tx.Receive - tx.EmptyReceive
	t.Logf("%d hops: %d sends, %d receives that brought it, %d updates, %d deletes", hops, tx.Send, received, tx.Update, tx.Delete)
	assert.Equal(t, int64(1), tx.Send)
	assert.LessOrEqual(t, float64(tx.Update), 1.1*float64(hops), "about one update per hop")
	assert.Equal(t, hops+1, received, "each hop rides on one receive, and the delivery on one")
	assert.Equal(t, int64(1), tx.Delete)
}

// Whether a delayed message is due is decided on the service's clock,
// whatever the listener's says: with the queue's clock two hours behind or
// ahead of the listener's, a message due in an hour by the service is
// hidden again, not handled, and one due a minute ago is handled at once,
// not held for two hours.
func TestTheListenersClockNeitherFiresEarlyNorHoldsLate(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		t.Run(fmt.Sprintf("service %v off", skew), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := memqueue.NewManualClock(time.Now().Add(skew).Truncate(time.Second))
			q := memqueue.New("delay-skew", &memqueue.Options{Clock: clock})
			// Sent visible at once, as a publisher whose own clock was
			// off would: only the due line says when they are due.
			early := dueText(clock.Now().Add(time.Hour), "early")
			late := dueText(clock.Now().Add(-time.Minute), "late")
			for _, text := range []string{early, late} {
				_, err := q.Send(ctx, text, nil)
				require.NoError(t, err)
			}
			var h handled
			l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
			require.NoError(t, err)
			running(t, l)

			waitUntil(t, "late handled, early hidden again", func() bool {
				s := l.State()
				return s.Succeeded == 1 && s.Rehidden == 1
			})
			require.Len(t, h.get(), 1)
			assert.Equal(t, "late", h.get()[0].m.Body)
			clock.Advance(time.Hour - time.Second)
			time.Sleep(50 * time.Millisecond)
			assert.Len(t, h.get(), 1, "not before its hour by the service's clock")
			clock.Advance(time.Second)
			waitUntil(t, "early handled when due", func() bool { return l.State().Succeeded == 2 })
			assert.Equal(t, int64(1), h.get()[1].m.DequeueCount)
		})
	}
}

// dueText is a message text due at at, as a publisher writes it.
func dueText(at time.Time, body string) string {
	return fmt.Sprintf(wire.DueMagic+"{\"at\":%q}\n%s", at.UTC().Format(time.RFC3339), body)
}

// A delayed message whose handler fails is retried and poisoned by the
// usual rules, its hops not counted as tries; the envelope keeps the body
// without the due line, so a requeued message is not delayed again.
func TestADelayedMessageFailsRetriesAndIsPoisonedByTheUsualRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, clock, q, h := b.ctx, b.clock, b.queue, b.handled
	s, err := b.pub.SendAfter(ctx, "bill", 20*24*time.Hour)
	require.NoError(t, err)

	l, stop := b.listen(errors.New("down"), &azdispatch.ListenerOptions{
		MaxDequeueCount: 3, Retry: func(int64) time.Duration { return 0 },
	})
	for hop := int64(1); hop <= 2; hop++ {
		clock.Advance(week)
		waitUntil(t, "hop", func() bool { return l.State().Rehidden == hop })
	}
	clock.Advance(s.Due.Sub(clock.Now()))
	waitUntil(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	require.NoError(t, stop())

	var counts []int64
	for _, c := range h.get() {
		counts = append(counts, c.m.DequeueCount)
	}
	assert.Equal(t, []int64{1, 2, 3}, counts, "three real tries, whatever the hops before")
	ds, err := q.PoisonQueue().Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	env, err := azdispatch.ParsePoison(ds[0].Text)
	require.NoError(t, err)
	assert.Equal(t, int64(3), env.DequeueCount)
	assert.Equal(t, `"bill"`, env.Body, "the envelope keeps the body, not the due line")
	require.NoError(t, q.PoisonQueue().SetVisibility(ctx, ds[0], 0))

	res, err := azdispatch.Requeue(ctx, q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved)
	back, err := q.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, back, 1, "requeued, it is visible at once: not delayed again")
	assert.Equal(t, `"bill"`, back[0].Text, "a codec's text alone goes back byte for byte")
}

// What the feature costs a message sent with no delay, or with a delay
// the service keeps on its own: one send. A message sent for now has the
// codec's text, byte for byte; a delayed one, a line before it that says
// when it is due, so that its time in queue is counted from then.
func TestAMessageWithoutALongDelayIsSentAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("delay-none", nil)
	pub, err := azdispatch.NewPublisher[map[string]int](q, nil)
	require.NoError(t, err)
	_, err = pub.Send(ctx, map[string]int{"a": 1})
	require.NoError(t, err)
	_, err = pub.SendAfter(ctx, map[string]int{"b": 2}, 0)
	require.NoError(t, err)
	s, err := pub.SendAfter(ctx, map[string]int{"c": 3}, azdispatch.MaxVisibility)
	require.NoError(t, err)
	assert.Equal(t, int64(3), q.Transactions().Send)
	assert.Equal(t, int64(3), q.Transactions().Total())
	got, err := q.Receive(ctx, azdispatch.MaxBatch, time.Minute)
	require.NoError(t, err)
	var texts []string
	for _, d := range got {
		texts = append(texts, d.Text)
	}
	assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, texts)
	assert.Equal(t, got[0].InsertedAt.Add(azdispatch.MaxVisibility), s.Due)
	clock := memqueue.NewManualClock(startOfSecond)
	q = memqueue.New("delay-kept", &memqueue.Options{Clock: clock})
	pub, err = azdispatch.NewPublisher[map[string]int](q, nil)
	require.NoError(t, err)
	_, err = pub.SendAfter(ctx, map[string]int{"d": 4}, time.Minute)
	require.NoError(t, err)
	clock.Advance(time.Minute)
	got, err = q.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, wire.DueMagic+"{\"after\":60}\n{\"d\":4}", got[0].Text,
		"a delay the service keeps: one send, and a line that says when it is due, for its time in queue")
	assert.Equal(t, int64(1), q.Transactions().Send)
}

// SendAt hides a message by the queue's clock, not the publisher's: over a
// queue whose clock is a year behind the machine's, a message due in ten
// days is handled ten days later by the queue's clock, after one hop.
func TestSendAtCountsOnTheServicesClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Now().AddDate(-1, 0, 0).Truncate(time.Second).UTC())
	q := memqueue.New("delay-at", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	at := clock.Now().Add(10 * 24 * time.Hour)
	s, err := pub.SendAt(ctx, "later", at.Add(-time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, at, s.Due, "rounded up to the second")

	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	clock.Advance(week)
	waitUntil(t, "hidden again", func() bool { return l.State().Rehidden == 1 })
	clock.Advance(at.Sub(clock.Now()))
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	assert.True(t, at.Equal(h.get()[0].at), "handled at its time")

	past, err := pub.SendAt(ctx, "now", clock.Now().Add(-time.Hour))
	require.NoError(t, err)
	waitUntil(t, "a time past is sent visible", func() bool { return l.State().Succeeded == 2 })
	assert.Equal(t, int64(1), l.State().Rehidden)
	assert.Equal(t, clock.Now().Add(-time.Hour), past.Due)
}

// A due line that does not parse is poisoned with the reason, as any
// malformed text is: the handler never sees it.
func TestAMalformedDueLineIsPoisoned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("delay-bad", nil)
	_, err := q.Send(ctx, wire.DueMagic+"{\"after\":-5}\nbody", nil)
	require.NoError(t, err)
	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	waitUntil(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	assert.Empty(t, h.get())
	ds, err := q.PoisonQueue().Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	env, err := azdispatch.ParsePoison(ds[0].Text)
	require.NoError(t, err)
	assert.Contains(t, env.Reason, "malformed due line")
}

// A claim-checked message delayed beyond 7 days (its body in a blob of an
// emulator's payload store, its pointer on a queue with a manual clock) is
// hidden again like any other, then handled whole once, and its blob
// deleted after it.
func TestALongDelayedClaimCheckIsHandledWholeWhenDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acct, err := azdispatch.NewAccountFromConnectionString(azdispatch.EmulatorConnectionString(t), nil)
	require.NoError(t, err)
	store, err := acct.PayloadStore(fmt.Sprintf("delayed-%d", time.Now().UnixNano()))
	require.NoError(t, err)
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("delay-claim", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Payloads: store})
	require.NoError(t, err)
	body := strings.Repeat("x", azdispatch.MaxMessageSize+1)
	s, err := pub.SendAfter(ctx, body, 10*24*time.Hour)
	require.NoError(t, err)

	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Payloads: azdispatch.PayloadOptions{Store: store}, Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	clock.Advance(week)
	waitUntil(t, "hidden again", func() bool { return l.State().Rehidden == 1 })
	clock.Advance(s.Due.Sub(clock.Now()))
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.Len(t, h.get(), 1)
	assert.Equal(t, body, h.get()[0].m.Body)
	// The blob is deleted after the message, and after Succeeded counts it.
	var res azdispatch.SweepResult
	waitUntil(t, "its blob deleted", func() bool {
		res, err = azdispatch.Sweep(ctx, store, &azdispatch.SweepOptions{DryRun: true})
		require.NoError(t, err)
		return res.Scanned == 1
	})
	assert.Equal(t, 1, res.Live, "only the record of its delivery is left, kept as long as the message could have lived, for a late cancel to read")
}

// A hop whose Update fails close to the due time is not a try: the message
// reappears before it is due, is held by the listener until then, and is
// handled as its first delivery; with MaxDequeueCount 1 it is not poisoned.
func TestAFailedHopNearItsDueTimeIsNotATry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock, q, h := b.clock, b.queue, b.handled
	s, err := b.pub.SendAfter(b.ctx, "x", 2*week+3*time.Second)
	require.NoError(t, err)
	l, _ := b.listen(nil, &azdispatch.ListenerOptions{MaxDequeueCount: 1, VisibilityTimeout: 2 * time.Second})
	clock.Advance(week)
	waitUntil(t, "hop 1", func() bool { return l.State().Rehidden == 1 })
	q.FailNext(azdispatch.OpUpdate, 1, nil)
	clock.Advance(week) // 3 s before due: hidden again, but the update fails
	waitUntil(t, "the hop's update tried", func() bool { return q.Transactions().Update >= 2 })
	// Its visibility ends a second before it is due: received, and held
	// until then on the queue's clock, which the test moves.
	clock.Advance(2 * time.Second)
	waitUntil(t, "received, and held", func() bool { return l.State().InFlight == 1 })
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, h.get(), "held while the queue's clock reads before its due time")
	clock.Advance(time.Second)
	waitUntil(t, "handled", func() bool { return l.State().Succeeded == 1 })
	calls := h.get()
	require.Len(t, calls, 1)
	assert.Equal(t, int64(1), calls[0].m.DequeueCount, "the failed hop was not a try")
	assert.Equal(t, s.Due, calls[0].at, "received a second early by the queue's clock, and held until due")
	assert.Zero(t, l.State().Poisoned)
}

// A due line whose "seen" is not below the message's dequeue count would
// keep a failing message from ever being poisoned: it is refused.
func TestADueLineSeenBeyondTheDequeueCountIsPoisoned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("delay-seen", nil)
	_, err := q.Send(ctx, wire.DueMagic+"{\"after\":1,\"seen\":1000000}\nboom", nil)
	require.NoError(t, err)
	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, errors.New("fails")), &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	waitUntil(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	assert.Empty(t, h.get())
}

// Times a due line cannot carry are refused before any request: SendAt
// beyond the year 9999 or before 1970, a delay beyond a century. A delay
// beyond what the service counts in a TTL (68 years) never expires.
func TestTimesADueLineCannotCarryAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("delay-range", nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	_, err = pub.SendAt(ctx, "x", time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC))
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	_, err = pub.SendAt(ctx, "x", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	_, err = pub.SendAfter(ctx, "x", 101*365*24*time.Hour)
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	assert.Zero(t, q.Transactions().Total())

	eighty := 80 * 365 * 24 * time.Hour
	s, err := pub.SendAfter(ctx, "x", eighty)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(eighty), s.Due, 5*time.Second, "not cut to 68 years")
}

// Messages waiting together share the receives that bring them back: for
// 64 messages 400 days ahead, each re-hide costs about one request, the
// Update, and a thirty-second of a receive.
func TestWaitingMessagesShareTheirReceives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("delay-many", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	const n = 64
	for range n {
		_, err := pub.SendAfter(ctx, "renew", 400*24*time.Hour)
		require.NoError(t, err)
	}
	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	hops := int64(0)
	for range 57 {
		clock.Advance(week)
		hops++
		waitUntil(t, "a round of hops", func() bool { return l.State().Rehidden == n*hops })
	}
	clock.Advance(2 * 24 * time.Hour)
	waitUntil(t, "all handled", func() bool { return l.State().Succeeded == n })

	tx := q.Transactions()
	received := tx.Receive - tx.EmptyReceive
	perHop := float64(tx.Update+received) / float64(n*hops) // the final deliveries' receives too: a bound
	t.Logf("%d messages × %d hops: %d updates, %d receives that brought messages: %.3f requests per re-hide", n, hops, tx.Update, received, perHop)
	assert.Equal(t, n*hops, tx.Update)
	assert.LessOrEqual(t, perHop, 1.1)
	assert.Len(t, h.get(), n)
}

// A send middleware that changes the delay changes what is sent and what
// the send says of it: the due line, the due time.
func TestASendMiddlewareThatChangesTheDelayIsTakenAtItsWord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("delay-mw", &memqueue.Options{Clock: clock})
	setDelay := func(d time.Duration) azdispatch.SendMiddleware {
		return azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
			s.Delay = d
			return s.Next(ctx)
		})
	}
	now, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Middleware: []azdispatch.SendMiddleware{setDelay(0)}})
	require.NoError(t, err)
	s, err := now.SendAfter(ctx, "now", 30*24*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, clock.Now(), s.Due, "sent visible at once, as the middleware said")
	later, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Middleware: []azdispatch.SendMiddleware{setDelay(10*24*time.Hour + time.Millisecond)}})
	require.NoError(t, err)
	s, err = later.SendAfter(ctx, "later", 0)
	require.NoError(t, err)
	assert.Equal(t, clock.Now().Add(10*24*time.Hour+time.Second), s.Due, "rounded up to the second")
	bad, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Middleware: []azdispatch.SendMiddleware{setDelay(-time.Second)}})
	require.NoError(t, err)
	_, err = bad.SendAfter(ctx, "x", time.Second)
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)

	got, err := q.Receive(ctx, azdispatch.MaxBatch, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "now", got[0].Text, "no due line")
	clock.Advance(azdispatch.MaxVisibility)
	got, err = q.Receive(ctx, azdispatch.MaxBatch, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, strings.HasPrefix(got[0].Text, wire.DueMagic), "a due line: %q", got[0].Text)
}

// PlainDelays keeps a delayed message's text the codec's, byte for byte,
// for queues shared with other readers; and a text that fits only without
// its line goes without it, rather than to a blob.
func TestADelayedMessageWithoutItsLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(startOfSecond)
	q := memqueue.New("delay-plain", &memqueue.Options{Clock: clock})
	plain, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{PlainDelays: true})
	require.NoError(t, err)
	_, err = plain.SendAfter(ctx, "plain", time.Minute)
	require.NoError(t, err)
	pub, err := azdispatch.NewPublisher[string](q, nil) // memqueue has no payload store
	require.NoError(t, err)
	near := strings.Repeat("x", azdispatch.MaxMessageSize-10) // with its quotes, 8 bytes to spare
	_, err = pub.SendAfter(ctx, near, time.Minute)
	require.NoError(t, err, "sent without its line, not offloaded")
	clock.Advance(time.Minute)
	got, err := q.Receive(ctx, 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, `"plain"`, got[0].Text)
	assert.Equal(t, `"`+near+`"`, got[1].Text)
}

// A SendAt centuries ahead, up to the last second of 9999, is taken: the
// message carries its time, is hidden a week at a time, and never expires
// (TestCancelOfAMessageCenturiesAhead cancels one). (Years 2400 and 9999 were refused as a SendOptions.Delay
// beyond 7 days: a time.Duration cannot hold the wait, and a rounding step
// overflowed.) A time past 9999 is refused with the real limit.
func TestSendAtCenturiesAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("delay-centuries", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)
	for _, at := range []time.Time{
		time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 58, 500_000_000, time.UTC), // rounded up, still 9999
	} {
		s, err := pub.SendAt(ctx, at.String(), at)
		require.NoError(t, err, "%v", at)
		assert.Equal(t, at.Add(time.Second-1).Truncate(time.Second), s.Due, "due to the second, rounded up")
	}
	clock.Advance(week)
	waitUntil(t, "hidden again", func() bool { return l.State().Rehidden >= 3 })
	assert.Empty(t, h.get(), "not handled centuries early")
	n, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "none expired")

	for _, bad := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC), // rounds up into 10000
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err = pub.SendAt(ctx, "x", bad)
		require.ErrorIs(t, err, azdispatch.ErrInvalidConfig, "%v", bad)
		assert.Contains(t, err.Error(), "1970 to 9999", "the real limit")
	}
}

// A message received shortly before it is due is held until then on the
// queue's clock, not the machine's: on a manual clock the handler does not
// run while the clock reads before its due time, however long the test
// waits. (It was held on the local clock, and ran while a manual clock read
// up to 30 s early.)
func TestAMessageHeldUntilDueWaitsForTheQueuesClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("delay-held", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := pub.SendAfter(ctx, "later", week+2*time.Second)
	require.NoError(t, err)
	var h handled
	l, err := azdispatch.NewListener(q, h.handler(q, nil), &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	running(t, l)

	clock.Advance(week) // back 2 s before its due time: held, not hidden again
	time.Sleep(3 * time.Second)
	require.Empty(t, h.get(), "ran while the queue's clock read before its due time")
	clock.Advance(2 * time.Second)
	waitUntil(t, "handled once due", func() bool { return len(h.get()) == 1 })
	assert.False(t, h.get()[0].at.Before(s.Due), "on or after its due time by the queue's clock")
}
