package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/memqueue"
)

// groupSetup is a group's children queue and its continuation queue, on
// memqueue, with a publisher of each.
type groupSetup struct {
	children, next       *memqueue.Queue
	pubChildren, pubNext *azdispatch.Publisher[string]
}

func setupGroup(t *testing.T) *groupSetup {
	t.Helper()
	return setupGroupOn(t, nil)
}

// setupGroupOn is setupGroup with the children's queue on clock, if it is
// not nil.
func setupGroupOn(t *testing.T, clock *memqueue.ManualClock) *groupSetup {
	t.Helper()
	children := memqueue.New("children", nil)
	if clock != nil {
		children = memqueue.New("children", &memqueue.Options{Clock: clock})
	}
	s := &groupSetup{children: children, next: memqueue.New("next", nil)}
	var err error
	s.pubChildren, err = azdispatch.NewPublisher[string](s.children, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	s.pubNext, err = azdispatch.NewPublisher[string](s.next, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	return s
}

// childListener handles the children: h, with the continuation sent to
// the next queue.
func (s *groupSetup) childListener(t *testing.T, h azdispatch.Handler[string]) *azdispatch.Listener[string] {
	t.Helper()
	l, err := azdispatch.NewListener(s.children, h, &azdispatch.ListenerOptions{
		Codec:   azdispatch.Raw(),
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle},
		Retry:   func(int64) time.Duration { return 0 },
		Payloads: azdispatch.PayloadOptions{Continue: func(name string) (azdispatch.Target, error) {
			if name != s.next.Name() {
				return nil, fmt.Errorf("no queue %q", name)
			}
			return s.next, nil
		}},
	})
	require.NoError(t, err)
	return l
}

// startChildren starts a group whose continuation is "then" to the next
// queue, and sends one child per body.
func (s *groupSetup) startChildren(t *testing.T, opts *azdispatch.GroupOptions, bodies ...string) *azdispatch.Group {
	t.Helper()
	ctx := context.Background()
	then, err := azdispatch.ContinueWith(s.pubNext, "then")
	require.NoError(t, err)
	g, err := s.children.PayloadStore().StartGroup(ctx, len(bodies), then, opts)
	require.NoError(t, err)
	for i, body := range bodies {
		_, err := s.pubChildren.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	return g
}

// countingListener handles the children one at a time, with a visibility
// timeout of a second for a manual clock to pass, through h, and counts
// the handler's calls by body.
func (s *groupSetup) countingListener(t *testing.T, h azdispatch.Handler[string]) (*azdispatch.Listener[string], func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	calls := map[string]int{}
	l, err := azdispatch.NewListener(s.children, func(ctx context.Context, m *azdispatch.Message[string]) error {
		mu.Lock()
		calls[m.Body]++
		mu.Unlock()
		return h(ctx, m)
	}, &azdispatch.ListenerOptions{
		Codec: azdispatch.Raw(), VisibilityTimeout: time.Second,
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 1}, Concurrency: 1,
		Payloads: azdispatch.PayloadOptions{Continue: func(string) (azdispatch.Target, error) { return s.next, nil }},
	})
	require.NoError(t, err)
	return l, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(calls)
	}
}

// continuations handles the next queue's messages until n are handled,
// and returns each handled one's body and group outcome.
func (s *groupSetup) continuations(t *testing.T, n int64) ([]string, []*azdispatch.GroupOutcome, azdispatch.State) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	var outcomes []*azdispatch.GroupOutcome
	l, err := azdispatch.NewListener(s.next, func(_ context.Context, m *azdispatch.Message[string]) error {
		o, ok := azdispatch.GroupOutcomeOf(m.MessageInfo)
		assert.True(t, ok, "a continuation carries its group's outcome")
		mu.Lock()
		defer mu.Unlock()
		bodies, outcomes = append(bodies, m.Body), append(outcomes, o)
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	st := runUntil(t, l, func(st azdispatch.State) bool { return st.Succeeded+st.Duplicates >= n })
	return bodies, outcomes, st
}

// A group of children, one of them poisoned and one sent twice, under
// ContinueOnFinish: once every child is handled or poisoned, one
// continuation is sent, with the group's outcome, and handled once, even
// when it is sent twice.
func TestAGroupSendsItsContinuationOnceEveryChildHasFinished(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	then, err := azdispatch.ContinueWith(s.pubNext, "build the index")
	require.NoError(t, err)
	const size = 20
	g, err := s.children.PayloadStore().StartGroup(ctx, size, then, &azdispatch.GroupOptions{ID: "thumbnails", Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	for i := range size {
		_, err := s.pubChildren.SendWith(ctx, fmt.Sprint(i), &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	_, err = s.pubChildren.SendWith(ctx, "3", &azdispatch.SendOptions{Group: g.Child(3)}) // sent twice
	require.NoError(t, err)

	st, err := s.children.PayloadStore().GroupStatus(ctx, "thumbnails")
	require.NoError(t, err)
	assert.Equal(t, size, st.Pending)
	assert.False(t, st.Complete)

	l := s.childListener(t, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "7" {
			return azdispatch.Permanent(errors.New("corrupt image"))
		}
		return nil
	})
	runUntil(t, l, func(st azdispatch.State) bool { return st.Succeeded+st.Poisoned == size+1 })

	st, err = s.children.PayloadStore().GroupStatus(ctx, "thumbnails")
	require.NoError(t, err)
	assert.True(t, st.Complete)
	assert.Equal(t, "failed", st.Outcome)
	assert.Equal(t, size-1, st.Succeeded)
	require.Len(t, st.Failures, 1)
	assert.Equal(t, 7, st.Failures[0].Child)
	assert.Contains(t, st.Failures[0].Reason, "corrupt image")

	// The last child's finish and the second copy of child 3's may both
	// find the group complete before either marks it continued, and both
	// send it: one or two continuations are queued. One more is sent (as
	// after a crash between a send and its mark): one is handled, the
	// others dropped by its once-mark.
	front, err := s.next.Peek(ctx, 32)
	require.NoError(t, err)
	require.NotEmpty(t, front, "a continuation")
	require.LessOrEqual(t, len(front), 2, "a continuation per finish that found the group complete")
	_, err = s.next.Send(ctx, front[0].Text, nil)
	require.NoError(t, err)

	bodies, outcomes, next := s.continuations(t, int64(len(front)+1))
	assert.Equal(t, []string{"build the index"}, bodies)
	assert.EqualValues(t, len(front), next.Duplicates)
	o := outcomes[0]
	assert.Equal(t, "thumbnails", o.ID)
	assert.Equal(t, "failed", o.Outcome)
	assert.Equal(t, size, o.Size)
	assert.Equal(t, size-1, o.Succeeded)
	assert.Equal(t, 1, o.Failed)
	require.NotNil(t, o.FailedChild)
	assert.Equal(t, 7, *o.FailedChild)
}

// A continuation lives as its publisher's messages do: one made with a
// publisher whose messages never expire never does, and one whose
// publisher has the service's default lives 7 days, as any message would.
// (It had lived 7 days whatever its publisher said: a continuation whose
// listeners were stopped for a week was lost, and its group's outcome with
// it.)
func TestAContinuationLivesAsItsPublishersMessages(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		ttl     time.Duration
		expires bool
	}{{ttl: -1}, {ttl: 0, expires: true}, {ttl: 30 * 24 * time.Hour, expires: true}} {
		s := setupGroup(t)
		pub, err := azdispatch.NewPublisher[string](s.next, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), TTL: c.ttl})
		require.NoError(t, err)
		then, err := azdispatch.ContinueWith(pub, "then")
		require.NoError(t, err)
		g, err := s.children.PayloadStore().StartGroup(ctx, 1, then, nil)
		require.NoError(t, err)
		_, err = s.pubChildren.SendWith(ctx, "0", &azdispatch.SendOptions{Group: g.Child(0)})
		require.NoError(t, err)
		runUntil(t, s.childListener(t, func(context.Context, *azdispatch.Message[string]) error { return nil }),
			func(st azdispatch.State) bool { return st.Succeeded == 1 })

		front, err := s.next.Peek(ctx, 32)
		require.NoError(t, err)
		require.Len(t, front, 1, "TTL %v: the continuation", c.ttl)
		d := front[0]
		if !c.expires {
			assert.True(t, d.ExpiresAt.IsZero() || d.ExpiresAt.Sub(d.InsertedAt) > 60*365*24*time.Hour, "TTL %v: never expires: %v", c.ttl, d.ExpiresAt)
			continue
		}
		want := c.ttl
		if want == 0 {
			want = 7 * 24 * time.Hour
		}
		assert.Equal(t, want, d.ExpiresAt.Sub(d.InsertedAt), "TTL %v", c.ttl)
	}
}

// Under ContinueOnSuccess a poisoned child keeps the group waiting;
// requeued and handled, it completes the group.
func TestAGroupWaitsForAPoisonedChildRequeued(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	then, err := azdispatch.ContinueWith(s.pubNext, "next step")
	require.NoError(t, err)
	g, err := s.children.PayloadStore().StartGroup(ctx, 3, then, nil)
	require.NoError(t, err)
	for i := range 3 {
		_, err := s.pubChildren.SendWith(ctx, fmt.Sprint(i), &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	var broken sync.Mutex
	fail := true
	l := s.childListener(t, func(_ context.Context, m *azdispatch.Message[string]) error {
		broken.Lock()
		defer broken.Unlock()
		if m.Body == "1" && fail {
			return azdispatch.Permanent(errors.New("not yet"))
		}
		return nil
	})
	runUntil(t, l, func(st azdispatch.State) bool { return st.Succeeded+st.Poisoned == 3 })
	st, err := s.children.PayloadStore().GroupStatus(ctx, g.ID)
	require.NoError(t, err)
	assert.False(t, st.Complete, "a poisoned child keeps it waiting")
	n, err := s.next.Depth(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "no continuation yet")

	broken.Lock()
	fail = false
	broken.Unlock()
	res, err := azdispatch.Requeue(ctx, s.children.PoisonQueue(), s.children, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved)
	l = s.childListener(t, func(context.Context, *azdispatch.Message[string]) error { return nil })
	runUntil(t, l, func(st azdispatch.State) bool { return st.Succeeded == 1 })
	bodies, outcomes, _ := s.continuations(t, 1)
	assert.Equal(t, []string{"next step"}, bodies)
	assert.Equal(t, "succeeded", outcomes[0].Outcome)
	assert.Equal(t, 3, outcomes[0].Succeeded)
}

func TestGroupOptionsAreChecked(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	then, err := azdispatch.ContinueWith(s.pubNext, "x")
	require.NoError(t, err)
	store := s.children.PayloadStore()
	var ce *azdispatch.ConfigError
	_, err = store.StartGroup(ctx, 0, then, nil)
	assert.ErrorAs(t, err, &ce, "no children")
	_, err = store.StartGroup(ctx, 1, azdispatch.Continuation{}, nil)
	assert.ErrorAs(t, err, &ce, "no continuation")
	_, err = store.StartGroup(ctx, 1, then, &azdispatch.GroupOptions{ID: "a/b"})
	assert.ErrorAs(t, err, &ce, "an ID that names another blob")
	_, err = store.StartGroup(ctx, 1, then, &azdispatch.GroupOptions{Rule: 9})
	assert.ErrorAs(t, err, &ce)
	_, err = azdispatch.ContinueWith(s.pubNext, wire.MetaMagic+"{}\nbody")
	assert.ErrorAs(t, err, &ce, "a text a listener would misread")
	_, err = azdispatch.ContinueWith(s.pubNext, "bell\x07")
	assert.ErrorAs(t, err, &ce, "a text a queue cannot carry")
	_, err = azdispatch.ContinueWith(s.pubNext, strings.Repeat("x", azdispatch.MaxMessageSize))
	assert.ErrorAs(t, err, &ce, "too long for a message")
	g, err := store.StartGroup(ctx, 2, then, &azdispatch.GroupOptions{ID: "same"})
	require.NoError(t, err)
	_, err = store.StartGroup(ctx, 2, then, &azdispatch.GroupOptions{ID: "same"})
	require.NoError(t, err, "started again by a creator that runs again")
	_, err = store.StartGroup(ctx, 3, then, &azdispatch.GroupOptions{ID: "same"})
	assert.ErrorIs(t, err, azdispatch.ErrGroupExists)
	_, err = store.GroupStatus(ctx, "never")
	assert.ErrorIs(t, err, azdispatch.ErrGroupNotFound)

	_, err = s.pubChildren.SendBatch(ctx, []string{"a"}, &azdispatch.SendOptions{Group: g.Child(0)})
	assert.ErrorAs(t, err, &ce, "a batch is no child")
	_, err = s.children.Send(ctx, "a", &azdispatch.SendOptions{Group: g.Child(0)})
	assert.ErrorAs(t, err, &ce, "a Target's Send sends no child")
	assert.Panics(t, func() { g.Child(2) })

	// A handler that forwards a child's metadata (here, a middleware that
	// sets it) does not make another child, nor a continuation.
	meta := azdispatch.Metadata{"azdispatch-group": g.ID, "azdispatch-once": "00000000000000000000000000000000", "trace": "t"}
	fwd, err := azdispatch.NewPublisher[string](s.next, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(),
		Middleware: []azdispatch.SendMiddleware{azdispatch.SendMiddlewareFunc(func(ctx context.Context, o *azdispatch.Outgoing) error {
			o.Metadata = meta
			return o.Next(ctx)
		})}})
	require.NoError(t, err)
	_, err = fwd.Send(ctx, "forwarded")
	require.NoError(t, err)
	front, err := s.next.Peek(ctx, 32)
	require.NoError(t, err)
	require.Len(t, front, 1)
	assert.Contains(t, front[0].Text, `"trace"`)
	assert.NotContains(t, front[0].Text, "azdispatch-group")
	assert.NotContains(t, front[0].Text, "azdispatch-once")
}

// Storage fails a child's finish, loses the answer to another's after it
// took effect, and loses the answer to the continuation's send after the
// message was sent: each child's message is kept and comes back, is only
// finished and deleted (its handler does not run again), and the group's
// continuation, sent twice, is handled once.
func TestAGroupSurvivesFailedAndLostRequests(t *testing.T) {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := setupGroupOn(t, clock)
	const size = 3
	g := s.startChildren(t, nil, "0", "1", "2")
	s.children.FailNext(memqueue.OpBlobWrite, 1, nil) // a finish refused (503)
	s.children.LoseNext(memqueue.OpBlobWrite, 1)      // a finish done, its answer lost
	s.next.LoseNext(azdispatch.OpSend, 1)             // the continuation sent, its answer lost

	l, calls := s.countingListener(t, func(context.Context, *azdispatch.Message[string]) error { return nil })
	runPastFailedDeletes(t, l, clock, func(st azdispatch.State) bool { return st.Succeeded == size })
	st := l.State()
	// The refused finish's message comes back and completes the group,
	// but its continuation's answer is lost: it is kept once more. The
	// lost finish's message comes back too. Each is finished and deleted
	// on a later delivery, its handler not run again.
	assert.EqualValues(t, 3, st.Lost, "three tries kept for their next delivery")
	assert.EqualValues(t, 2, st.HandledBefore, "two messages only finished and deleted then")
	assert.Equal(t, map[string]int{"0": 1, "1": 1, "2": 1}, calls(), "each child handled once")
	bodies, _, next := s.continuations(t, 2)
	assert.Equal(t, []string{"then"}, bodies, "sent twice, handled once")
	assert.EqualValues(t, 1, next.Duplicates)
	status, err := s.children.PayloadStore().GroupStatus(ctx, g.ID)
	require.NoError(t, err)
	assert.True(t, status.Complete)
	assert.Equal(t, size, status.Succeeded)
}

// A child's finish refused on its first delivery is recorded on its next
// with what only the first knew: the result its handler left, the reason
// it was poisoned for. (Both had been lost: the next delivery, which only
// finishes and deletes, recorded a success without its result and a
// failure without its reason.)
func TestAChildsResultAndReasonOutliveARefusedFinish(t *testing.T) {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := setupGroupOn(t, clock)
	g := s.startChildren(t, &azdispatch.GroupOptions{Rule: azdispatch.ContinueOnFinish}, "resize", "corrupt")
	s.children.FailNext(memqueue.OpBlobWrite, 2, nil) // both first finishes refused (503)

	l, calls := s.countingListener(t, func(ctx context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "corrupt" {
			return azdispatch.Permanent(errors.New("the image is corrupt"))
		}
		return azdispatch.SetGroupResult(ctx, []byte("1024x768"))
	})
	runPastFailedDeletes(t, l, clock, func(st azdispatch.State) bool { return st.Succeeded+st.Poisoned == 2 })
	st := l.State()
	assert.EqualValues(t, 2, st.Lost, "both kept for their next delivery")
	assert.EqualValues(t, 2, st.HandledBefore, "both only finished and deleted then")
	assert.Equal(t, map[string]int{"resize": 1, "corrupt": 1}, calls(), "each handler ran once")

	results, err := s.children.PayloadStore().GroupResults(ctx, g.ID)
	require.NoError(t, err)
	assert.Equal(t, map[int][]byte{0: []byte("1024x768")}, results, "the result left on the refused delivery")
	status, err := s.children.PayloadStore().GroupStatus(ctx, g.ID)
	require.NoError(t, err)
	require.True(t, status.Complete)
	require.Len(t, status.Failures, 1)
	assert.Contains(t, status.Failures[0].Reason, "the image is corrupt", "the reason it was poisoned for")
}

// A continuation poisoned and requeued is handled: its poison envelope
// keeps its text and its group's outcome, but not its once-mark, which its
// first delivery wrote under another message ID. (It had been dropped as a
// duplicate of itself, and its group's outcome lost for good.)
func TestAPoisonedContinuationRequeuedIsHandled(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	g := s.startChildren(t, nil, "only")
	runUntil(t, s.childListener(t, func(context.Context, *azdispatch.Message[string]) error { return nil }),
		func(st azdispatch.State) bool { return st.Succeeded == 1 })

	var calls atomic.Int32
	continuation := func(_ context.Context, m *azdispatch.Message[string]) error {
		o, ok := azdispatch.GroupOutcomeOf(m.MessageInfo)
		assert.True(t, ok && o.ID == g.ID && o.Outcome == "succeeded", "its group's outcome: %+v", o)
		if calls.Add(1) == 1 {
			return azdispatch.Permanent(errors.New("the index service refused it"))
		}
		return nil
	}
	opts := &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}}
	l, err := azdispatch.NewListener(s.next, continuation, opts)
	require.NoError(t, err)
	runUntil(t, l, func(st azdispatch.State) bool { return st.Poisoned == 1 })

	res, err := azdispatch.Requeue(ctx, s.next.PoisonQueue(), s.next, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved)
	l, err = azdispatch.NewListener(s.next, continuation, opts)
	require.NoError(t, err)
	st := runUntil(t, l, func(st azdispatch.State) bool { return st.Succeeded+st.Duplicates+st.Poisoned == 1 })
	assert.EqualValues(t, 1, st.Succeeded, "handled, not dropped as a duplicate: %+v", st)
	assert.EqualValues(t, 2, calls.Load())
}

// A group started under the ID of one whose records were swept is
// continued: its continuation's once-mark is not the earlier group's,
// which outlives the group's records when their life is shorter. (It had
// been dropped as a duplicate of the earlier group's continuation.)
func TestAGroupStartedUnderASweptGroupsIDIsContinued(t *testing.T) {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := setupGroupOn(t, clock)
	for round := range 2 {
		s.startChildren(t, &azdispatch.GroupOptions{ID: "nightly", Life: time.Hour}, "only")
		runUntil(t, s.childListener(t, func(context.Context, *azdispatch.Message[string]) error { return nil }),
			func(st azdispatch.State) bool { return st.Succeeded == 1 })
		bodies, _, next := s.continuations(t, 1)
		assert.Equal(t, []string{"then"}, bodies, "round %d", round)
		assert.Zero(t, next.Duplicates, "round %d", round)

		clock.Advance(2 * time.Hour)
		res, err := azdispatch.Sweep(ctx, s.children.PayloadStore(), nil)
		require.NoError(t, err)
		require.Equal(t, 1, res.Deleted, "round %d: the group's head", round)
	}
}

// Sweep removes a group's records (its head and its shards) and a tracked
// message's status once their life has passed since their last write, and
// keeps them before. (It had taken them for another writer's blobs, by
// their names, and kept them for ever.)
func TestSweepRemovesGroupsAndStatusesOnceTheirLifeHasPassed(t *testing.T) {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := setupGroupOn(t, clock)
	store := s.children.PayloadStore()
	bodies := make([]string, 65) // two shards
	g := s.startChildren(t, &azdispatch.GroupOptions{Life: time.Hour}, bodies...)
	sent, err := s.pubChildren.SendWith(ctx, "tracked", &azdispatch.SendOptions{Track: true, TTL: time.Hour})
	require.NoError(t, err)

	res, err := azdispatch.Sweep(ctx, store, nil)
	require.NoError(t, err)
	assert.Equal(t, azdispatch.SweepResult{Scanned: 4, Live: 4, Records: 4, LiveBytes: res.LiveBytes}, res, "a head, two shards and a status, all live")

	clock.Advance(31 * 24 * time.Hour)
	res, err = azdispatch.Sweep(ctx, store, nil)
	require.NoError(t, err)
	assert.Equal(t, azdispatch.SweepResult{Scanned: 4, Deleted: 4, Records: 4, DeletedBytes: res.DeletedBytes}, res)
	_, err = store.GroupStatus(ctx, g.ID)
	assert.ErrorIs(t, err, azdispatch.ErrGroupNotFound)
	_, err = store.MessageStatus(ctx, sent.StatusToken)
	assert.ErrorIs(t, err, azdispatch.ErrStatusNotFound)
}

// A group's start whose write fails, or whose answer is lost, fails with
// a *StorageError naming the group's blob, as every request of a payload
// store does; started again under the same ID, it recognises the group its
// lost write made, and a different group under that ID is refused.
func TestAGroupStartedAgainAfterAFailedOrLostWriteIsTheSameGroup(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	then, err := azdispatch.ContinueWith(s.pubNext, "then")
	require.NoError(t, err)
	store := s.children.PayloadStore()
	opts := &azdispatch.GroupOptions{ID: "resize"}

	s.children.FailNext(memqueue.OpBlobWrite, 1, nil)
	_, err = store.StartGroup(ctx, 3, then, opts)
	var se *azdispatch.StorageError
	require.ErrorAs(t, err, &se, "a refused write")
	assert.Equal(t, memqueue.OpBlobWrite, se.Op)
	assert.Contains(t, se.Blob, "groups/resize")

	s.children.LoseNext(memqueue.OpBlobWrite, 1)
	_, err = store.StartGroup(ctx, 3, then, opts)
	require.ErrorAs(t, err, &se, "a lost answer")
	g, err := store.StartGroup(ctx, 3, then, opts)
	require.NoError(t, err, "started again: the group the lost write made")
	assert.Equal(t, "resize", g.ID)
	_, err = store.StartGroup(ctx, 4, then, opts)
	assert.ErrorIs(t, err, azdispatch.ErrGroupExists, "another group under the same ID")
}

// Children leave results for their continuation, which reads them all, and
// starts a group of its own (a chain): run twice (its first call fails
// after starting it), the chained group is the same one, its children
// count once, and its own continuation is handled once.
func TestChildrenLeaveResultsAndAContinuationStartsTheNextGroup(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	final := memqueue.New("final", nil)
	pubFinal, err := azdispatch.NewPublisher[string](final, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	store := s.children.PayloadStore()
	queues := map[string]azdispatch.Target{s.next.Name(): s.next, final.Name(): final}
	opts := &azdispatch.ListenerOptions{
		Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle},
		Retry: func(int64) time.Duration { return 0 },
		Payloads: azdispatch.PayloadOptions{Store: store, Continue: func(name string) (azdispatch.Target, error) {
			return queues[name], nil
		}},
	}
	then, err := azdispatch.ContinueWith(s.pubNext, "index")
	require.NoError(t, err)
	const size = 100 // two shards
	g, err := store.StartGroup(ctx, size, then, &azdispatch.GroupOptions{ID: "resize"})
	require.NoError(t, err)
	for i := range size {
		_, err := s.pubChildren.SendWith(ctx, fmt.Sprint(i), &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	assert.Error(t, azdispatch.SetGroupResult(ctx, []byte("x")), "not a handler's context")
	children, err := azdispatch.NewListener(s.children, func(ctx context.Context, m *azdispatch.Message[string]) error {
		require.Error(t, azdispatch.SetGroupResult(ctx, make([]byte, azdispatch.MaxGroupResult+1)))
		require.NoError(t, azdispatch.SetGroupResult(ctx, []byte("first")))
		return azdispatch.SetGroupResult(ctx, []byte("w"+m.Body)) // the last one counts
	}, opts)
	require.NoError(t, err)
	runUntil(t, children, func(st azdispatch.State) bool { return st.Succeeded == size })

	var calls int
	var results map[int][]byte
	index, err := azdispatch.NewListener(s.next, func(ctx context.Context, m *azdispatch.Message[string]) error {
		calls++
		o, ok := azdispatch.GroupOutcomeOf(m.MessageInfo)
		require.True(t, ok)
		if results, err = store.GroupResults(ctx, o.ID); err != nil {
			return err
		}
		next, err := azdispatch.ContinueWith(pubFinal, "published")
		if err != nil {
			return err
		}
		// The chained group's ID is the continuation's own group's, so
		// that a second call starts the same group.
		g2, err := store.StartGroup(ctx, 3, next, &azdispatch.GroupOptions{ID: o.ID + ".publish"})
		if err != nil {
			return err
		}
		for i := range 3 {
			if _, err := s.pubChildren.SendWith(ctx, "p"+fmt.Sprint(i), &azdispatch.SendOptions{Group: g2.Child(i)}); err != nil {
				return err
			}
		}
		if calls == 1 {
			return errors.New("failed after starting the next group")
		}
		return nil
	}, opts)
	require.NoError(t, err)
	runUntil(t, index, func(st azdispatch.State) bool { return st.Succeeded == 1 })
	assert.Equal(t, 2, calls)
	require.Len(t, results, size)
	assert.Equal(t, []byte("w42"), results[42])

	children, err = azdispatch.NewListener(s.children, func(context.Context, *azdispatch.Message[string]) error { return nil }, opts)
	require.NoError(t, err)
	runUntil(t, children, func(st azdispatch.State) bool { return st.Succeeded == 6 }) // each sent twice
	st, err := store.GroupStatus(ctx, "resize.publish")
	require.NoError(t, err)
	assert.True(t, st.Complete)
	assert.Equal(t, 3, st.Succeeded)

	var published int
	last, err := azdispatch.NewListener(final, func(_ context.Context, m *azdispatch.Message[string]) error {
		published++
		o, _ := azdispatch.GroupOutcomeOf(m.MessageInfo)
		assert.Equal(t, "resize.publish", o.ID)
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle}})
	require.NoError(t, err)
	end := runUntil(t, last, func(st azdispatch.State) bool { return st.Succeeded+st.Duplicates >= 1 })
	assert.Equal(t, 1, published)
	assert.EqualValues(t, 1, end.Succeeded)
}

// A continuation whose queue the listener cannot open keeps the child that
// completed its group (it is tried again), and the listener's state says
// why: a fatal error, which FatalTimeout may end Run on.
func TestAContinuationThatCannotBeSentIsAFatalError(t *testing.T) {
	ctx := context.Background()
	s := setupGroup(t)
	then, err := azdispatch.ContinueWith(s.pubNext, "then")
	require.NoError(t, err)
	g, err := s.children.PayloadStore().StartGroup(ctx, 1, then, nil)
	require.NoError(t, err)
	_, err = s.pubChildren.SendWith(ctx, "only", &azdispatch.SendOptions{Group: g.Child(0)})
	require.NoError(t, err)
	l, err := azdispatch.NewListener(s.children, func(context.Context, *azdispatch.Message[string]) error { return nil },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: quickIdle},
			Payloads: azdispatch.PayloadOptions{Continue: func(name string) (azdispatch.Target, error) {
				return nil, fmt.Errorf("no queue %q here", name)
			}}})
	require.NoError(t, err)
	st := runUntil(t, l, func(st azdispatch.State) bool { return st.Fatal != nil })
	assert.ErrorContains(t, st.Fatal, "no queue")
	assert.Zero(t, st.Succeeded, "the child is kept")
	depth, err := s.children.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, depth)
}

// A child's finish written but whose answer was lost is recorded again on
// the message's next delivery, without a handler call: the result and the
// poisoning's reason the first record carried stay.
func TestAFinishRecordedAgainKeepsItsResultAndReason(t *testing.T) {
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := setupGroupOn(t, clock)
	then, err := azdispatch.ContinueWith(s.pubNext, "then")
	require.NoError(t, err)
	store := s.children.PayloadStore()
	g, err := store.StartGroup(ctx, 3, then, &azdispatch.GroupOptions{ID: "kept", Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	for i, body := range []string{"ok", "lost", "broken"} {
		_, err := s.pubChildren.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	var calls sync.Map
	l, err := azdispatch.NewListener(s.children, func(ctx context.Context, m *azdispatch.Message[string]) error {
		n, _ := calls.LoadOrStore(m.Body, new(int))
		*n.(*int)++
		if err := azdispatch.SetGroupResult(ctx, []byte("made "+m.Body)); err != nil {
			return err
		}
		if m.Body != "ok" {
			s.children.LoseNext(memqueue.OpBlobWrite, 1) // its finish: written, its answer lost
		}
		if m.Body == "broken" {
			return azdispatch.Permanent(errors.New("cannot be made"))
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Codec: azdispatch.Raw(), VisibilityTimeout: time.Second,
		Scaling: azdispatch.ScalingOptions{Idle: quickIdle, MaxDequeuers: 1}, Concurrency: 1,
		Payloads: azdispatch.PayloadOptions{Continue: func(string) (azdispatch.Target, error) { return s.next, nil }},
	})
	require.NoError(t, err)
	runPastFailedDeletes(t, l, clock, func(st azdispatch.State) bool { return st.Succeeded+st.Poisoned == 3 })
	for _, body := range []string{"ok", "lost", "broken"} {
		n, _ := calls.Load(body)
		assert.Equal(t, 1, *n.(*int), "%s handled once", body)
	}
	assert.EqualValues(t, 2, l.State().HandledBefore, "two recorded again on a later delivery, without a call")
	results, err := store.GroupResults(ctx, "kept")
	require.NoError(t, err)
	assert.Equal(t, map[int][]byte{0: []byte("made ok"), 1: []byte("made lost")}, results)
	st, err := store.GroupStatus(ctx, "kept")
	require.NoError(t, err)
	require.Len(t, st.Failures, 1)
	assert.Contains(t, st.Failures[0].Reason, "cannot be made")
}
