package azdispatch

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/storagefault"
)

// Against Azurite: a batch handler with no window costs no request per
// message over a handler for one message at a time (a receive per 32
// messages, a delete each), and is called once per receive, with up to
// 32 messages.
func TestABatchHandlerCostsNoRequestOverOneMessageAtATime(t *testing.T) {
	t.Parallel()
	const n = 320
	var mu sync.Mutex
	largest := 0
	run := func(batch bool) State {
		q := testQueue(t)
		sendJobs(t, q, n)
		opts := &ListenerOptions{Scaling: ScalingOptions{MaxDequeuers: 1, Idle: ExponentialIdle(0, 50*time.Millisecond)}}
		var l *Listener[job]
		var err error
		if batch {
			l, err = NewBatchListener(q, func(_ context.Context, msgs []*Message[job]) error {
				mu.Lock()
				largest = max(largest, len(msgs))
				mu.Unlock()
				return nil
			}, opts)
		} else {
			l, err = NewListener(q, func(context.Context, *Message[job]) error { return nil }, opts)
		}
		require.NoError(t, err)
		stop := started(t, l)
		waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
		require.NoError(t, stop())
		assertSettled(t, l.State())
		return l.State()
	}
	single, batched := run(false), run(true)
	perMessage := func(s State) float64 {
		return float64(s.Transactions.Total()-s.Transactions.EmptyReceive) / n
	}
	tx := batched.Transactions
	full := tx.Receive - tx.EmptyReceive
	assert.EqualValues(t, n, tx.Delete, "one delete per message")
	assert.Zero(t, tx.Update, "nothing released or renewed")
	assert.Equal(t, full, batched.Calls, "one call per receive that brought messages")
	assert.LessOrEqual(t, full, int64(n/MaxBatch+2), "full receives")
	assert.LessOrEqual(t, largest, MaxBatch)
	assert.LessOrEqual(t, perMessage(batched), perMessage(single)+2.0/n, "at most two partial receives more")
	t.Logf("requests per message (empty receives aside): one at a time %.4f, batch handler %.4f; %d calls of %.1f messages on average",
		perMessage(single), perMessage(batched), batched.Calls, float64(batched.CallMessages)/float64(batched.Calls))
}

// Against Azurite: with keyed shards and a Subset each, every key's
// messages reach one listener, and a batch handler by key gathers them
// there: every call holds one key, and no key is called by two listeners.
func TestABatchByKeyGathersAKeysMessagesInOneListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq := shardedQueue(t, 2, nil, testAccount(t, nil))
	pub, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	const keys, each = 12, 5
	for i := range keys * each {
		_, err := pub.SendKeyed(ctx, fmt.Sprint("customer-", i%keys), fmt.Sprint(i))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	byListener := map[string]int{} // key: the listener that called it
	handled := 0
	for i := range 2 {
		sub, err := sq.Subset(i, 2)
		require.NoError(t, err)
		l, err := NewBatchListener(sub, func(_ context.Context, msgs []*Message[string]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				assert.Equal(t, msgs[0].Key, m.Key, "a call of one key")
				if who, ok := byListener[m.Key]; ok {
					assert.Equal(t, i, who, "key %s called by two listeners", m.Key)
				}
				byListener[m.Key] = i
			}
			handled += len(msgs)
			return nil
		}, &ListenerOptions{Codec: Raw(), Batch: BatchOptions{ByKey: true, MaxItems: each, MaxWait: 500 * time.Millisecond},
			Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond)}})
		require.NoError(t, err)
		stop := started(t, l)
		t.Cleanup(func() { require.NoError(t, stop()) })
	}
	waitFor(t, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return handled == keys*each })
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, byListener, keys)
}

// Against Azurite, with deletes that fail: some refused with 503 before
// they reach the emulator, some carried out and their answer lost. Each
// message is still handled once (a batch's messages are remembered as
// handled until their delete succeeds, however it failed), and every one
// is deleted in the end.
func TestABatchHandlerSurvivesFailedAndLostDeletes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	deletes := 0
	next := newHTTPClient()
	acct := testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: transportFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodDelete || !strings.Contains(req.URL.Path, "/messages/") {
				return next.Do(req)
			}
			mu.Lock()
			deletes++
			k := deletes
			mu.Unlock()
			switch {
			case k%5 == 0: // refused, never carried out
				return storagefault.ServiceError(req, http.StatusServiceUnavailable, "ServerBusy", nil), nil
			case k%3 == 0: // carried out, its answer lost
				if resp, err := next.Do(req); err == nil {
					resp.Body.Close()
				}
				return storagefault.ServiceError(req, http.StatusInternalServerError, "InternalError", nil), nil
			}
			return next.Do(req)
		}),
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}})
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	createQueue(t, q.Name())
	const n = 96
	sendJobs(t, q, n)
	var hmu sync.Mutex
	calls := map[int]int{}
	l, err := NewBatchListener(q, func(_ context.Context, msgs []*Message[job]) error {
		hmu.Lock()
		defer hmu.Unlock()
		for _, m := range msgs {
			calls[m.Body.N]++
		}
		return nil
	}, &ListenerOptions{VisibilityTimeout: time.Second, Retry: func(int64) time.Duration { return 0 },
		Scaling: ScalingOptions{Idle: ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "every message deleted", func() bool { return depth(t, q) == 0 && l.State().InFlight == 0 })
	require.NoError(t, stop())
	hmu.Lock()
	defer hmu.Unlock()
	assert.Len(t, calls, n)
	for i, c := range calls {
		assert.Equal(t, 1, c, "message %d handled %d times", i, c)
	}
	s := l.State()
	t.Logf("%d deletes tried; %d deliveries only deleted (handled before); %d lost", deletes, s.HandledBefore, s.Lost)
}

// transportFunc is a policy.Transporter of a function.
type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }
