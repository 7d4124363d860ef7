package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The simulated scenario's model of the storage service: queues and accounts
// in memory that enforce the published scalability targets with token
// buckets (each holding a quarter of a second of its rate, so that
// round-robin jitter is absorbed but a sustained excess is not) and answer 503 ServerBusy above
// them, as the service does. Each account may also have a client side: the
// RequestLimiter an azdispatch.Account would pace its requests with
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

// take removes n tokens if there are that many.
func (b *bucket) take(n float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.rate*simBucketSeconds, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// simAccount is one storage account of the model.
type simAccount struct {
	requests *bucket
	busy     *atomic.Int64              // 503s answered, over the whole model
	limiter  *azdispatch.RequestLimiter // the client's pacing; nil for none
}

// simQueue is one queue of the model; it is an azdispatch.Shard.
type simQueue struct {
	name    string
	account *simAccount
	msgs    *bucket

	mu       sync.Mutex
	ready    []*azdispatch.Delivery
	inflight map[string]*azdispatch.Delivery
	nextID   int64

	received atomic.Int64 // messages handed out
	sent     atomic.Int64 // messages accepted
}

var _ azdispatch.Shard = (*simQueue)(nil)

func newSimQueue(name string, a *simAccount) *simQueue {
	return &simQueue{name: name, account: a, msgs: newBucket(simQueueMsgsPerS), inflight: map[string]*azdispatch.Delivery{}}
}

func (q *simQueue) Name() string { return q.name }

// busy is the service's answer to a request over a target.
func (q *simQueue) busy(op string) error {
	q.account.busy.Add(1)
	return &azdispatch.StorageError{Op: op, Queue: q.name, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy",
		Err: errors.New("over the simulated scalability target")}
}

// fill puts n messages on the queue without going through the targets: the
// starting backlog of a drain.
func (q *simQueue) fill(n int, text string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for range n {
		q.nextID++
		q.ready = append(q.ready, &azdispatch.Delivery{ID: q.name + "/" + strconv.FormatInt(q.nextID, 10), Text: text})
	}
}

// pace waits for the client's turn to send a request, as the pipeline of an
// Account with a Limiter does.
func (q *simQueue) pace(ctx context.Context) error { return q.account.limiter.Wait(ctx) }

func (q *simQueue) Send(ctx context.Context, text string, _ *azdispatch.SendOptions) (string, error) {
	if err := q.pace(ctx); err != nil {
		return "", err
	}
	if !q.account.requests.take(1) || !q.msgs.take(1) {
		return "", q.busy("send")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	id := q.name + "/" + strconv.FormatInt(q.nextID, 10)
	q.ready = append(q.ready, &azdispatch.Delivery{ID: id, Text: text})
	q.sent.Add(1)
	return id, nil
}

func (q *simQueue) Receive(ctx context.Context, max int, _ time.Duration) ([]*azdispatch.Delivery, error) {
	if err := q.pace(ctx); err != nil {
		return nil, err
	}
	if !q.account.requests.take(1) {
		return nil, q.busy("receive")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(max, len(q.ready))
	if n == 0 {
		return nil, nil
	}
	if !q.msgs.take(float64(n)) {
		return nil, q.busy("receive")
	}
	out := make([]*azdispatch.Delivery, n)
	now := time.Now()
	for i, d := range q.ready[:n] {
		m := *d
		m.DequeueCount++
		m.InsertedAt, m.NextVisibleAt = now, now.Add(30*time.Second)
		q.inflight[m.ID] = d
		out[i] = &m
	}
	q.ready = q.ready[n:]
	q.received.Add(int64(n))
	return out, nil
}

func (q *simQueue) Delete(ctx context.Context, d *azdispatch.Delivery) error {
	if err := q.pace(ctx); err != nil {
		return err
	}
	if !q.account.requests.take(1) {
		return q.busy("delete")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.inflight[d.ID]; !ok {
		// Also what a delete sent to the wrong shard would get.
		return fmt.Errorf("%w: %s not in flight on %s", azdispatch.ErrOwnershipLost, d.ID, q.name)
	}
	delete(q.inflight, d.ID)
	return nil
}

func (q *simQueue) SetVisibility(ctx context.Context, d *azdispatch.Delivery, after time.Duration) error {
	if err := q.pace(ctx); err != nil {
		return err
	}
	if !q.account.requests.take(1) {
		return q.busy("update")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	orig, ok := q.inflight[d.ID]
	if !ok {
		return fmt.Errorf("%w: %s not in flight on %s", azdispatch.ErrOwnershipLost, d.ID, q.name)
	}
	if after == 0 {
		delete(q.inflight, d.ID)
		q.ready = append(q.ready, orig)
	}
	return nil
}

func (q *simQueue) Depth(ctx context.Context) (int, error) {
	if err := q.pace(ctx); err != nil {
		return 0, err
	}
	if !q.account.requests.take(1) {
		return 0, q.busy("depth")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready) + len(q.inflight), nil
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
			accts[i].limiter = azdispatch.NewRequestLimiter(simAccountReqsPerS)
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
