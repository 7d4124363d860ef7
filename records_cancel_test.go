package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// testHop stands for the service's 7 days in tests against the emulator,
// which cannot wait a week: messages due beyond it are hidden again.
const testHop = time.Second

// cancelRig is a queue with a payload store of its own, a publisher on
// it, and a listener that counts its handler calls, with hops of testHop.
type cancelRig struct {
	q       *Queue
	store   *PayloadStore
	pub     *Publisher[job]
	l       *Listener[job]
	handled atomic.Int64
}

func newCancelRig(t *testing.T) *cancelRig {
	t.Helper()
	r := &cancelRig{q: testQueue(t)}
	var err error
	r.store, err = r.q.Account().PayloadStore(uniqueName(t))
	require.NoError(t, err)
	// As in a store in use: the first record of a new container would
	// count its creation too.
	err = r.store.blobs.CreateContainer(context.Background())
	require.NoError(t, err)
	r.pub, err = NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store})
	require.NoError(t, err)
	r.pub.policy.Hop = testHop
	o := quick()
	o.Payloads.Store = r.store
	// Messages due within a visibility timeout are held by the listener,
	// not hidden again: one as short as a hop keeps the hops.
	o.VisibilityTimeout = testHop
	r.l, err = NewListener(r.q, func(context.Context, *Message[job]) error {
		r.handled.Add(1)
		return nil
	}, o)
	require.NoError(t, err)
	r.l.hop = testHop
	return r
}

// publisherThrough is a publisher to queue with its payloads in container,
// through acct: another process's, or one with faults of its own.
func publisherThrough(t *testing.T, acct *Account, queue, container string) *Publisher[job] {
	t.Helper()
	q, err := acct.Queue(queue)
	require.NoError(t, err)
	store, err := acct.PayloadStore(container)
	require.NoError(t, err)
	p, err := NewPublisher[job](q, &PublisherOptions{Payloads: store})
	require.NoError(t, err)
	return p
}

// records reads the states of the cancel records in the rig's store.
func (r *cancelRig) records(t *testing.T) []string {
	t.Helper()
	var states []string
	for _, name := range listBlobs(t, r.store) {
		rec, err := r.store.readRecord(context.Background(), name)
		if err == nil {
			states = append(states, rec.meta.State)
		}
	}
	return states
}

// A message cancelled while still in its send's hidden period is deleted
// with the send's pop receipt: two requests (the delete and the record a
// second cancel reads), and the handler never runs. Once the message could
// no longer live, a sweep leaves nothing of it.
func TestCancelBeforeTheFirstHop(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	pub, err := NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store, TTL: time.Second})
	require.NoError(t, err)
	pub.policy.Hop = testHop
	s, err := pub.SendAfter(ctx, job{N: 1}, 3*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, s.Token)

	cctx, cost := CountTransactions(ctx)
	require.NoError(t, pub.Cancel(cctx, s.Token))
	tx := cost()
	t.Logf("a cancel in the first hidden period: %d requests (%d delete, %d blob write)", tx.Total(), tx.Delete, tx.BlobWrite)
	assert.Equal(t, int64(1), tx.Delete)
	assert.Equal(t, int64(1), tx.BlobWrite)
	assert.Equal(t, int64(2), tx.Total())

	err = pub.Cancel(ctx, s.Token)
	assert.ErrorIs(t, err, ErrAlreadyCancelled)
	started(t, r.l)
	time.Sleep(4 * time.Second) // past its due time
	assert.Zero(t, r.handled.Load())
	assert.Zero(t, depth(t, r.q), "deleted")
	assert.Equal(t, []string{payload.StateCancelled}, r.records(t), "one record, as long as the message could live")
	time.Sleep(2 * time.Second) // and past its TTL
	res, err := Sweep(ctx, r.store, &SweepOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Deleted, "a sweep after the message's life removes the record")
	assert.Empty(t, listBlobs(t, r.store), "nothing left")
}

// A message cancelled after listeners hid it again several times is found
// cancelled when it is due: deleted unhandled, with its payload blob, and
// its record kept for a second cancel until a sweep. A message never
// cancelled pays one conditional write when due.
func TestCancelAfterSeveralHops(t *testing.T) {
	long(t)
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	big := job{N: 2}
	// Far enough ahead for two hops each (one a second) however late a
	// loaded machine starts the listener.
	s, err := r.pub.SendAfter(ctx, big, 10*time.Second)
	require.NoError(t, err)
	kept, err := r.pub.SendAfter(ctx, job{N: 3}, 10*time.Second)
	require.NoError(t, err)
	started(t, r.l)
	waitFor(t, "hidden again twice each", func() bool { return r.l.State().Rehidden >= 4 })

	cctx, cost := CountTransactions(ctx)
	require.NoError(t, r.pub.Cancel(cctx, s.Token))
	tx := cost()
	t.Logf("a cancel after hops: %d requests (%d delete attempt, %d blob write)", tx.Total(), tx.Delete, tx.BlobWrite)
	assert.Equal(t, int64(2), tx.Total())

	waitFor(t, "found cancelled when due", func() bool { return r.l.State().Cancelled == 1 })
	waitFor(t, "the other handled", func() bool { return r.l.State().Succeeded == 1 })
	assert.Equal(t, int64(1), r.handled.Load(), "only the message not cancelled")
	assert.Zero(t, depth(t, r.q))
	assert.ErrorIs(t, r.pub.Cancel(ctx, s.Token), ErrAlreadyCancelled)
	assert.ErrorIs(t, r.pub.Cancel(ctx, kept.Token), ErrAlreadyDelivered)
	assert.ElementsMatch(t, []string{payload.StateCancelled, payload.StateDelivered}, r.records(t))
	// The listener's blob requests when the two came due: the delivered
	// record of the one not cancelled (one write); for the cancelled one,
	// its record's conflict (a write refused), its read, and marking it
	// expired (a write).
	lt := r.l.State().Transactions
	t.Logf("the listener when both came due: %d blob writes, %d blob reads, %d deletes", lt.BlobWrite, lt.BlobRead, lt.Delete)
	assert.Equal(t, int64(3), lt.BlobWrite)
	assert.Equal(t, int64(1), lt.BlobRead)
	assert.Equal(t, int64(2), lt.Delete)
}

// A cancelled claim-checked message leaves no blob behind.
func TestCancelRemovesTheBlobOfAClaimCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, after := range []time.Duration{0, 3 * time.Second} { // in the first hidden period; after hops
		r := newCancelRig(t)
		p, err := NewPublisher[string](r.q, &PublisherOptions{Codec: Raw(), Payloads: r.store})
		require.NoError(t, err)
		p.policy.Hop = testHop
		s, err := p.SendAfter(ctx, string(make([]byte, MaxMessageSize+1)), 5*time.Second)
		require.NoError(t, err)
		l, err := NewListener(r.q, func(context.Context, *Message[string]) error { return errors.New("must not run") },
			&ListenerOptions{Codec: Raw(), Payloads: PayloadOptions{Store: r.store}, Scaling: ScalingOptions{Idle: quick().Scaling.Idle}, VisibilityTimeout: testHop})
		require.NoError(t, err)
		l.hop = testHop
		started(t, l)
		time.Sleep(after)
		require.NoError(t, p.Cancel(ctx, s.Token))
		waitFor(t, "gone", func() bool { return depth(t, r.q) == 0 })
		// The payload blob goes after the message (a listing may still
		// catch it on a loaded machine): wait until only records are left.
		waitFor(t, "only its cancel record is left, no payload blob", func() bool {
			for _, name := range listBlobs(t, r.store) {
				if _, err := r.store.readRecord(ctx, name); err != nil {
					return false
				}
			}
			return true
		})
		assert.Zero(t, l.State().Failed)
	}
}

// Cancelling a message a listener has already received to handle says so.
func TestCancelAfterDelivery(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	short, err := r.pub.SendAfter(ctx, job{N: 1}, 0)
	require.NoError(t, err)
	long, err := r.pub.SendAfter(ctx, job{N: 2}, 2*time.Second)
	require.NoError(t, err)
	started(t, r.l)
	waitFor(t, "both handled", func() bool { return r.l.State().Succeeded == 2 })
	assert.ErrorIs(t, r.pub.Cancel(ctx, short.Token), ErrAlreadyDelivered)
	assert.ErrorIs(t, r.pub.Cancel(ctx, long.Token), ErrAlreadyDelivered)
	assert.Equal(t, []string{payload.StateDelivered, payload.StateDelivered}, r.records(t), "the one a delivery wrote, and the one the short one's cancel settled on")
	assert.ErrorIs(t, r.pub.Cancel(ctx, short.Token), ErrAlreadyDelivered, "and so says every cancel after")
}

// A token that is not one is refused before any request.
func TestCancelRefusesABadToken(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	for _, tok := range []string{"", "x", cancelToken{Queue: "other", ID: "1", Receipt: "r"}.encode(),
		cancelToken{Queue: r.q.name, ID: "1", Receipt: "r", Blob: "../x"}.encode(), string(make([]byte, 2000))} {
		assert.ErrorIs(t, r.pub.Cancel(context.Background(), tok), ErrInvalidConfig, "%q", tok)
	}
	assert.Zero(t, r.q.Transactions().Total())
}

// Two processes sending with the same unique key at once: one send goes
// out, every other is refused with ErrDuplicate. After the window the key
// is taken over; a failed send releases it; a sweep removes an expired one.
func TestUniqueSendsAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := uniqueName(t)
	createQueue(t, name)
	container := uniqueName(t)
	var pubs []*Publisher[job]
	for range 2 { // an account each: as two processes
		pubs = append(pubs, publisherThrough(t, testAccount(t, nil), name, container))
	}
	opts := &SendOptions{UniqueKey: "invoice-42", UniqueFor: 3 * time.Second}
	var wg sync.WaitGroup
	var sent, dup atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			_, err := pubs[i%2].SendWith(ctx, job{N: i}, opts)
			switch {
			case err == nil:
				sent.Add(1)
			case errors.Is(err, ErrDuplicate):
				dup.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), sent.Load())
	assert.Equal(t, int64(7), dup.Load())
	q, err := testAccount(t, nil).Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 1, depth(t, q))

	_, err = pubs[0].SendWith(ctx, job{}, &SendOptions{UniqueKey: "other", UniqueFor: time.Hour})
	require.NoError(t, err, "another key is another send")
	time.Sleep(4 * time.Second) // the window passes
	_, err = pubs[1].SendWith(ctx, job{N: 9}, opts)
	require.NoError(t, err, "taken over after its window")
	_, err = pubs[0].SendWith(ctx, job{N: 10}, opts)
	require.ErrorIs(t, err, ErrDuplicate, "and held again")

	time.Sleep(4 * time.Second)
	res, err := Sweep(ctx, pubs[0].store, &SweepOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Deleted, "the expired key; not the hour-long one")
	assert.Equal(t, 1, res.Live)
}

// failingTarget fails every send, after the key was taken.
type failingTarget struct{ name string }

func (f failingTarget) Name() string { return f.name }
func (f failingTarget) Send(context.Context, string, *SendOptions) (string, error) {
	return "", errors.New("send failed")
}

// A send that fails gives its unique key back at once.
func TestAFailedUniqueSendReleasesItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	store, err := q.Account().PayloadStore(uniqueName(t))
	require.NoError(t, err)
	bad, err := NewPublisher[job](failingTarget{name: q.Name()}, &PublisherOptions{Payloads: store})
	require.NoError(t, err)
	good, err := NewPublisher[job](q, &PublisherOptions{Payloads: store})
	require.NoError(t, err)
	opts := &SendOptions{UniqueKey: "k", UniqueFor: time.Hour}
	_, err = bad.SendWith(ctx, job{}, opts)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrDuplicate)
	assert.Empty(t, listBlobs(t, store), "released")
	cctx, cost := CountTransactions(ctx)
	_, err = good.SendWith(cctx, job{}, opts)
	require.NoError(t, err)
	tx := cost()
	t.Logf("a unique send: %d requests (%d send, %d blob write)", tx.Total(), tx.Send, tx.BlobWrite)
	assert.Equal(t, Transactions{Send: 1, BlobWrite: 1}, tx, "one conditional write more than a send")
	_, err = good.SendWith(ctx, job{}, opts)
	assert.ErrorIs(t, err, ErrDuplicate)
}

// A batch can be delayed beyond the service's limit, and cancelled, like a
// single message: its items are handled once when it is due; a cancelled
// batch leaves its items unhandled and no blob behind.
func TestABatchDelayedBeyondTheHop(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	// Due beyond the hop, so that a listener that starts in time hides the
	// batch again on the way; cancelled before the listener starts, so
	// that however slowly a loaded machine runs it, the cancel comes
	// before the batch is due. (How many times a batch is hidden again
	// depends on when the listener first looks, so it is not counted.)
	const delay = 8 * time.Second
	due, err := r.pub.SendBatch(ctx, []job{{N: 1}, {N: 2}, {N: 3}}, &SendOptions{Delay: delay})
	require.NoError(t, err)
	cancelled, err := r.pub.SendBatch(ctx, []job{{N: 4}, {N: 5}}, &SendOptions{Delay: delay})
	require.NoError(t, err)
	require.NoError(t, r.pub.Cancel(ctx, cancelled.Token))
	started(t, r.l)
	// The cancel deletes the batch by its send's receipt when it can (not
	// yet received), or the listener drops it when it comes (Cancelled).
	waitFor(t, "items handled", func() bool { return r.l.State().ItemsSucceeded == 3 })
	waitFor(t, "the other batch gone", func() bool { return depth(t, r.q) == 0 })
	assert.Equal(t, int64(3), r.handled.Load())
	assert.LessOrEqual(t, r.l.State().Cancelled, int64(1))
	assert.Zero(t, depth(t, r.q))
	for _, name := range listBlobs(t, r.store) {
		assert.NotEqual(t, due.BatchID, name, "the handled batch's blob is deleted")
		assert.NotEqual(t, cancelled.BatchID, name, "the cancelled batch's blob is deleted")
	}
}

// Cancels of one message racing each other, from several processes,
// agree: for a message still waiting, one returns nil and the others say
// it was cancelled; for one delivered, all say so; and every cancel after
// says the same.
func TestRacingCancelsAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	var pubs []*Publisher[job]
	for range 4 { // an account each: as four processes
		pubs = append(pubs, publisherThrough(t, testAccount(t, nil), r.q.Name(), r.store.Container()))
	}
	race := func(token string) []error {
		errs := make([]error, len(pubs))
		var wg sync.WaitGroup
		for i, p := range pubs {
			wg.Go(func() { errs[i] = p.Cancel(ctx, token) })
		}
		wg.Wait()
		return errs
	}
	for round := range 5 {
		waiting, err := r.pub.SendAfter(ctx, job{N: round}, time.Hour)
		require.NoError(t, err)
		nils := 0
		for _, err := range race(waiting.Token) {
			if err == nil {
				nils++
				continue
			}
			assert.ErrorIs(t, err, ErrAlreadyCancelled, "round %d", round)
		}
		assert.Equal(t, 1, nils, "round %d: one cancel wins", round)
		assert.ErrorIs(t, r.pub.Cancel(ctx, waiting.Token), ErrAlreadyCancelled)
	}
	delivered, err := r.pub.SendAfter(ctx, job{N: 9}, 0)
	require.NoError(t, err)
	started(t, r.l)
	waitFor(t, "handled", func() bool { return r.l.State().Succeeded == 1 })
	for _, err := range race(delivered.Token) {
		assert.ErrorIs(t, err, ErrAlreadyDelivered)
	}
	assert.ErrorIs(t, r.pub.Cancel(ctx, delivered.Token), ErrAlreadyDelivered)
	assert.Zero(t, depth(t, r.q))
}

// A send that failed after its key was taken over by another gives back
// nothing: the other's key stays.
func TestAFailedUniqueSendDoesNotFreeAKeyTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	release, err := r.pub.claimKey(ctx, "k", time.Second)
	require.NoError(t, err)
	time.Sleep(2500 * time.Millisecond) // its window passes
	other, err := NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store})
	require.NoError(t, err)
	_, err = other.claimKey(ctx, "k", time.Hour)
	require.NoError(t, err, "taken over")
	release() // the first send failed at last
	_, err = other.SendWith(ctx, job{}, &SendOptions{UniqueKey: "k", UniqueFor: time.Hour})
	assert.ErrorIs(t, err, ErrDuplicate, "still held for the other's hour")
}

// A key's window is never shorter than asked, though the service gives
// its time to the second.
func TestAUniqueWindowIsNeverShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	opts := &SendOptions{UniqueKey: "w", UniqueFor: 2 * time.Second}
	_, err := r.pub.SendWith(ctx, job{}, opts)
	require.NoError(t, err)
	first := time.Now()
	for {
		_, err := r.pub.SendWith(ctx, job{}, opts)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, ErrDuplicate)
		time.Sleep(50 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, time.Since(first), 2*time.Second-100*time.Millisecond, "not before the window's end (the emulator's clock is this machine's)")
}

// A cancel whose context ends midway leaves no record in the way: its
// delete never went, so it gives its record back, and a cancel tried again
// cancels the message.
func TestACancelCutShortCanBeTriedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	plain, err := NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store}) // no due line within 7 days
	require.NoError(t, err)
	s, err := plain.SendAfter(ctx, job{N: 1}, time.Hour)
	require.NoError(t, err)

	cctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	f := &faultTransport{fail: func(req *http.Request) bool {
		cut := false
		if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/messages/") {
			once.Do(func() { cancel(); cut = true })
		}
		return cut
	}}
	p := publisherThrough(t, faultyAccount(t, f, 0), r.q.Name(), r.store.Container())
	require.Error(t, p.Cancel(cctx, s.Token), "cut short")
	assert.Empty(t, r.records(t), "its record given back")
	cctx, cost := CountTransactions(ctx)
	require.NoError(t, p.Cancel(cctx, s.Token), "tried again")
	tx := cost()
	t.Logf("a cancel without a due line: %d requests (%d delete, %d blob writes)", tx.Total(), tx.Delete, tx.BlobWrite)
	assert.Equal(t, Transactions{Delete: 1, BlobWrite: 2}, tx, "its record, the delete, the record settled")
	assert.Zero(t, depth(t, r.q))
	assert.ErrorIs(t, plain.Cancel(ctx, s.Token), ErrAlreadyCancelled)
}

// A record a cancel left pending (it stopped between its record and its
// delete) is taken over once it is older than any cancel takes.
func TestAnAbandonedPendingCancelIsTakenOver(t *testing.T) {
	long(t)
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	plain, err := NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store}) // no due line within 7 days
	require.NoError(t, err)
	s, err := plain.SendAfter(ctx, job{N: 1}, time.Hour)
	require.NoError(t, err)
	c, err := parseCancelToken(s.Token)
	require.NoError(t, err)
	_, created, err := r.store.createRecord(ctx, cancelRecord(c.Queue, c.ID), r.pub.recordMeta(payload.KindCancel, payload.StatePending, 0))
	require.NoError(t, err)
	require.True(t, created)
	start := time.Now()
	require.NoError(t, plain.Cancel(ctx, s.Token))
	assert.GreaterOrEqual(t, time.Since(start), pendingLimit-time.Second, "it waited for the other cancel first")
	assert.Zero(t, depth(t, r.q))
	assert.Equal(t, []string{payload.StateCancelled}, r.records(t))
}

// A cancel of a message with a due line is done once its record is
// written: cut short before its delete, it still returns nil, and the
// listener drops the message when it is due.
func TestACancelWithADueLineIsDoneByItsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	s, err := r.pub.SendAfter(ctx, job{N: 1}, 3*time.Second) // beyond testHop: a due line
	require.NoError(t, err)
	f := &faultTransport{fail: func(req *http.Request) bool {
		return req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/messages/")
	}}
	p := publisherThrough(t, faultyAccount(t, f, 0), r.q.Name(), r.store.Container())
	require.NoError(t, p.Cancel(ctx, s.Token), "its delete failed, its record stands")
	started(t, r.l)
	waitFor(t, "dropped when due", func() bool { return r.l.State().Cancelled == 1 })
	assert.Zero(t, r.handled.Load())
}
