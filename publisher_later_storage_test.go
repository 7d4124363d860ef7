package azdispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// Against the emulator, a message received before it is due by the
// service's clock (the receive's Date) is hidden again with one Update
// Message that rewrites its due line, and handled once it is due as its
// first real delivery, though the service has dequeued it twice.
func TestAMessageNotYetDueIsHiddenAgainByTheServicesClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	// Sent visible at once, as by a publisher whose clock ran fast.
	// Far enough ahead that a receive delayed by a loaded machine still comes
	// more than a visibility timeout early.
	at := q.ServiceTime().Truncate(time.Second).Add(8 * time.Second)
	_, err := q.Send(ctx, (&wire.DueLine{At: at}).Encode()+`{"n":1}`, nil)
	require.NoError(t, err)

	var mu sync.Mutex
	var got []Message[job]
	var ranAt []time.Time
	l, err := NewListener(q, func(_ context.Context, m *Message[job]) error {
		mu.Lock()
		defer mu.Unlock()
		got, ranAt = append(got, *m), append(ranAt, q.ServiceTime())
		return nil
	}, &ListenerOptions{Scaling: ScalingOptions{Idle: quick().Scaling.Idle}, VisibilityTimeout: 2 * time.Second}) // shorter than the wait: hidden again, not held
	require.NoError(t, err)
	started(t, l)
	waitFor(t, "hidden again", func() bool { return l.State().Rehidden == 1 })
	waitFor(t, "handled", func() bool { return l.State().Succeeded == 1 })

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	assert.Equal(t, 1, got[0].Body.N)
	assert.False(t, ranAt[0].Before(at.Add(-time.Second)), "not before its time by the service's clock (to its second)")
	tx := q.Transactions()
	// The hop is not a try: one try on a quiet machine; and however many
	// receives brought the message (a hold stalled past its visibility
	// timeout lets it be received again, which is a try), fewer tries than
	// them.
	assert.Less(t, got[0].DequeueCount, tx.Receive-tx.EmptyReceive, "the hop was not a try")
	if tx.Receive-tx.EmptyReceive == 2 {
		assert.Equal(t, int64(1), got[0].DequeueCount, "the hop was not a try")
	}
	assert.Equal(t, int64(1), tx.Delete)
	// One Update Message for the hop and the hop's receive and the
	// delivery's; on a loaded machine perhaps more of each: a receive that
	// comes within a visibility timeout of the due time (the service's Date
	// is to the second) holds the message and renews its visibility at
	// half-life, and a hold stalled past that timeout lets the message be
	// received again. It is hidden again once and handled once all the same,
	// as above.
	assert.GreaterOrEqual(t, tx.Update, int64(1), "the hop's Update Message")
	assert.GreaterOrEqual(t, tx.Receive-tx.EmptyReceive, int64(2), "the hop's receive and the delivery's")
	assert.Equal(t, int64(1), l.State().Rehidden, "hidden again once")
}

// SendAt against the emulator hides the message by the service's clock as
// the queue last saw it, and the message is handled once, at its time.
func TestSendAtAgainstTheEmulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	_, err := q.Depth(ctx) // one answer, so that the queue knows the service's time
	require.NoError(t, err)
	p, err := NewPublisher[job](q, nil)
	require.NoError(t, err)
	s, err := p.SendAt(ctx, job{N: 2}, q.ServiceTime().Add(2*time.Second))
	require.NoError(t, err)

	var mu sync.Mutex
	var ranAt []time.Time
	l, err := NewListener(q, func(_ context.Context, m *Message[job]) error {
		mu.Lock()
		defer mu.Unlock()
		ranAt = append(ranAt, q.ServiceTime())
		return nil
	}, quick())
	require.NoError(t, err)
	started(t, l)
	waitFor(t, "handled", func() bool { return l.State().Succeeded == 1 })
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ranAt, 1)
	assert.False(t, ranAt[0].Before(s.Due.Add(-time.Second)), "not before its time by the service's clock (to its second)")
	assert.LessOrEqual(t, l.State().Rehidden, int64(1))
}

// A claim-checked message delayed beyond 7 days keeps its payload blob
// for as long as the message lives: its delay and then its TTL, so that
// Sweep does not remove a payload a waiting message still needs. Its text
// is the due line, then the pointer.
func TestALongDelayedClaimCheckKeepsItsBlobUntilItsMessageExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	store, err := q.Account().PayloadStore(uniqueName(t))
	require.NoError(t, err)
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw(), TTL: 24 * time.Hour, Payloads: store})
	require.NoError(t, err)
	delay := 30 * 24 * time.Hour
	_, err = p.SendAfter(ctx, string(make([]byte, MaxMessageSize+1)), delay)
	require.NoError(t, err)
	blobs := listBlobs(t, store)
	require.Len(t, blobs, 1)
	meta, _, err := store.properties(ctx, blobs[0])
	require.NoError(t, err)
	assert.WithinDuration(t, meta.Created.Add(delay+24*time.Hour), meta.Expires, time.Minute, "the delay, then the TTL")

	res, err := Sweep(ctx, store, &SweepOptions{DryRun: true})
	require.NoError(t, err)
	assert.Zero(t, res.Deleted, "a sweep keeps it")
}

// listBlobs lists the names of the blobs in store's container.
func listBlobs(t testing.TB, store *PayloadStore) []string {
	t.Helper()
	var names []string
	err := store.blobs.List(context.Background(), "", func(page []blobs.Info, _ time.Time) error {
		for _, b := range page {
			names = append(names, b.Name)
		}
		return nil
	})
	require.NoError(t, err)
	return names
}

// The emulator's answers carry the service's time: a receive's Date is on
// each delivery, and the queue keeps the time its answers gave.
func TestADeliveryCarriesTheServicesTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	_, err := q.Send(ctx, "x", nil)
	require.NoError(t, err)
	ds, err := q.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.WithinDuration(t, time.Now(), ds[0].ReceivedAt, 5*time.Second, "the receive's Date")
	assert.Zero(t, ds[0].ReceivedAt.Nanosecond(), "to the second, as the header gives it")
	assert.True(t, q.clock.Known(), "the queue saw the service's time")
}

// Before its queue has answered, a publisher does not know the service's
// time: a SendAt then asks first (one Get Queue Properties), and a time
// within 7 days is the service's own hidden period; the next one asks
// nothing more.
func TestSendAtBeforeTheQueueHasAnsweredLearnsItsTimeFirst(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	p, err := NewPublisher[job](q, nil)
	require.NoError(t, err)
	at := time.Now().Add(time.Hour)
	ctx, cost := CountTransactions(context.Background())
	_, r, err := p.routeFor(ctx, &SendOptions{At: at})
	require.NoError(t, err)
	assert.Equal(t, Transactions{Depth: 1}, cost(), "one request to learn the service's time")
	assert.False(t, p.policy.Hops(r), "the service's own hidden period")
	require.NotNil(t, p.policy.DueLine(r))
	line, _, err := wire.CutDue(p.policy.DueLine(r).Encode())
	require.NoError(t, err)
	assert.True(t, line.Kept(MaxVisibility), "its line only says when it is due")
	_, _, err = p.routeFor(ctx, &SendOptions{At: at})
	require.NoError(t, err)
	assert.Equal(t, Transactions{Depth: 1}, cost(), "known from then on")
}

// A send middleware that sets its own delay on a SendAt made before the
// queue has answered turns it into a delay the service keeps: the token
// and the line agree that no listener hides it again, so a cancel after a
// listener has received it says it was delivered, as it was. (The token
// once said it might hop while the line said it would not: the listener
// then delivered it without a record, and the cancel claimed it.)
func TestASendMiddlewaresDelayOnAnEarlySendAtNeedsNoHop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	p, err := NewPublisher[job](q, &PublisherOptions{Middleware: []SendMiddleware{delayTo(2 * time.Second)}})
	require.NoError(t, err)
	sent, err := p.SendAt(ctx, job{N: 1}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	c, err := parseCancelToken(sent.Token)
	require.NoError(t, err)
	assert.False(t, c.Hops, "the token: the service keeps it hidden")
	var got []*Delivery
	waitFor(t, "due", func() bool {
		got, err = q.Receive(ctx, 1, time.Minute)
		return err == nil && len(got) == 1
	})
	line, _, err := wire.CutDue(got[0].Text)
	require.NoError(t, err)
	assert.True(t, line.Kept(MaxVisibility), "the line: the service keeps it hidden")
	require.ErrorIs(t, p.Cancel(ctx, sent.Token), ErrAlreadyDelivered)
}

// delayTo is a send middleware that sets every send's delay to d.
type delayTo time.Duration

func (d delayTo) HandleSend(ctx context.Context, s *Outgoing) error {
	s.Delay = time.Duration(d)
	return s.Next(ctx)
}

// A message sent for the year 9999 is hidden, and can be cancelled.
func TestCancelOfAMessageCenturiesAhead(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	s, err := r.pub.SendAt(ctx, job{N: 1}, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	c, err := parseCancelToken(s.Token)
	require.NoError(t, err)
	assert.Zero(t, c.Expires, "never expires")
	assert.True(t, c.Hops)
	require.NoError(t, r.pub.Cancel(ctx, s.Token))
	assert.Zero(t, depth(t, r.q))
}

// A message sent for a time already past lives its TTL from its send, as
// the service counts it: a cancel within that life cancels it. (The token
// counted the TTL from the past time: the cancel said ErrAlreadyDelivered,
// and a listener then handled the message.)
func TestCancelOfAMessageSentForATimeAlreadyPast(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	pub, err := NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store, TTL: 30 * time.Second})
	require.NoError(t, err)
	s, err := pub.SendAt(ctx, job{N: 1}, time.Now().Add(-40*time.Second))
	require.NoError(t, err)
	require.NoError(t, pub.Cancel(ctx, s.Token), "within its life, counted from its send")
	started(t, r.l)
	time.Sleep(time.Second)
	assert.Zero(t, r.handled.Load())
	assert.Zero(t, depth(t, r.q))
}
