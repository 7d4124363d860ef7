package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// The simulated scenario's model of the storage service: memqueues (the
// in-memory queue with the service's semantics) grouped into accounts, that
// enforce the published scalability targets with token buckets (each
// holding a quarter of a second of its rate, so that round-robin jitter is
// absorbed but a sustained excess is not) and answer 503 ServerBusy above
// them, as the service does. Each account may also have a client side: the
// rate.Limiter an azdispatch.Account would pace its requests with
// (AccountOptions.Limiter), set to the account's target.
const (
	simQueueMsgsPerS   = 2000  // per queue: messages put or received
	simAccountReqsPerS = 20000 // per account: every request
	simBucketSeconds   = 0.25
)

// bucket is a token bucket.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64) *bucket {
	return &bucket{rate: rate, tokens: rate * simBucketSeconds, last: time.Now()}
}

// available is how many whole tokens the bucket holds now.
func (b *bucket) available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	return math.Floor(b.tokens)
}

// refill adds the tokens earned since the last look. The caller holds b.mu.
func (b *bucket) refill(now time.Time) {
	b.tokens = min(b.rate*simBucketSeconds, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// take removes n tokens if there are that many.
func (b *bucket) take(n float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// simAccount is one storage account of the model.
type simAccount struct {
	requests *bucket
	busy     *atomic.Int64 // 503s answered, over the whole model
	limiter  *rate.Limiter // the client's pacing; nil for none
}

// simQueue is one queue of the model: a memqueue, which gives it the
// service's semantics (visibility, receipts, dequeue counts), behind the
// model's targets. It is an azdispatch.Shard.
type simQueue struct {
	*memqueue.Queue
	account *simAccount
	msgs    *bucket

	received atomic.Int64 // messages handed out
	sent     atomic.Int64 // messages accepted
}

var _ azdispatch.Shard = (*simQueue)(nil)

func newSimQueue(name string, a *simAccount) *simQueue {
	return &simQueue{Queue: memqueue.New(name, nil), account: a, msgs: newBucket(simQueueMsgsPerS)}
}

// busy is the service's answer to a request over a target.
func (q *simQueue) busy(op azdispatch.Op) error {
	q.account.busy.Add(1)
	return &azdispatch.StorageError{Op: op, Queue: q.Name(), StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy",
		Err: errors.New("over the simulated scalability target")}
}

// fill puts n messages on the queue without going through the targets: the
// starting backlog of a drain.
func (q *simQueue) fill(n int, text string) {
	for range n {
		if _, err := q.Queue.Send(context.Background(), text, nil); err != nil {
			panic(err) // the text is the model's own: it fits
		}
	}
}

// request is every request's way in: the client's pacing (as the pipeline
// of an Account with a Limiter), then the account's target.
func (q *simQueue) request(ctx context.Context, op azdispatch.Op) error {
	if l := q.account.limiter; l != nil {
		if err := l.Wait(ctx); err != nil {
			return err
		}
	}
	if !q.account.requests.take(1) {
		return q.busy(op)
	}
	return nil
}

func (q *simQueue) Send(ctx context.Context, text string, opts *azdispatch.SendOptions) (string, error) {
	if err := q.request(ctx, azdispatch.OpSend); err != nil {
		return "", err
	}
	if !q.msgs.take(1) {
		return "", q.busy("send")
	}
	id, err := q.Queue.Send(ctx, text, opts)
	if err == nil {
		q.sent.Add(1)
	}
	return id, err
}

func (q *simQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*azdispatch.Delivery, error) {
	if err := q.request(ctx, azdispatch.OpReceive); err != nil {
		return nil, err
	}
	// The queue's target counts messages; how many a receive takes is known
	// only from the queue, so a receive asks for no more than the bucket
	// holds now, and is refused when it holds none.
	allowed := min(max, int(q.msgs.available()))
	if allowed == 0 {
		return nil, q.busy("receive")
	}
	ds, err := q.Queue.Receive(ctx, allowed, visibility)
	q.msgs.take(float64(len(ds)))
	q.received.Add(int64(len(ds)))
	return ds, err
}

func (q *simQueue) Delete(ctx context.Context, d *azdispatch.Delivery) error {
	if err := q.request(ctx, azdispatch.OpDelete); err != nil {
		return err
	}
	return q.Queue.Delete(ctx, d)
}

func (q *simQueue) SetVisibility(ctx context.Context, d *azdispatch.Delivery, after time.Duration) error {
	if err := q.request(ctx, azdispatch.OpUpdate); err != nil {
		return err
	}
	return q.Queue.SetVisibility(ctx, d, after)
}

func (q *simQueue) Depth(ctx context.Context) (int, error) {
	if err := q.request(ctx, azdispatch.OpDepth); err != nil {
		return 0, err
	}
	return q.Queue.Depth(ctx)
}

// simModel is accounts × queues of the model.
type simModel struct {
	queues []*simQueue
	busy   atomic.Int64
}

// newSimModel makes accounts × perAccount queues; queue i is in account
// i mod accounts, as AccountShards places them. If paced, each account's
// client paces its requests to the account's target.
func newSimModel(accounts, perAccount int, paced bool) *simModel {
	m := &simModel{}
	accts := make([]*simAccount, accounts)
	for i := range accts {
		accts[i] = &simAccount{requests: newBucket(simAccountReqsPerS), busy: &m.busy}
		if paced {
			accts[i].limiter = rate.NewLimiter(simAccountReqsPerS, simAccountReqsPerS/10)
		}
	}
	for i := range accounts * perAccount {
		m.queues = append(m.queues, newSimQueue(fmt.Sprintf("tasks-%d", i), accts[i%accounts]))
	}
	return m
}

func (m *simModel) shards() []azdispatch.Shard {
	out := make([]azdispatch.Shard, len(m.queues))
	for i, q := range m.queues {
		out[i] = q
	}
	return out
}

// maxOverMin is the busiest queue's count over the idlest's.
func maxOverMin(counts []int64) float64 {
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if lo == 0 {
		return 0
	}
	return float64(hi) / float64(lo)
}
