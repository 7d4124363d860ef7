package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
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

type item struct {
	N int `json:"n"`
}

// runUntil runs l until done holds, then stops it and returns its State.
func runUntil[T any](t *testing.T, l *azdispatch.Listener[T], done func(azdispatch.State) bool) azdispatch.State {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var run sync.WaitGroup
	var runErr error
	run.Go(func() { runErr = l.Run(ctx) })
	assert.Eventually(t, func() bool { return done(l.State()) }, 20*time.Second, 5*time.Millisecond)
	stop()
	run.Wait()
	require.NoError(t, runErr)
	return l.State()
}

// quickOptions are listener options for tests on a memqueue: a short idle
// back-off and retry delay.
func quickOptions(mw ...azdispatch.Middleware) *azdispatch.ListenerOptions {
	return &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond),
		},
		Retry:      func(int64) time.Duration { return time.Second },
		Middleware: mw,
	}
}

// oneAtATime makes o's listener run one handler call at a time, for a
// test that reads the order of what its calls did.
func oneAtATime(o *azdispatch.ListenerOptions) *azdispatch.ListenerOptions {
	o.Scaling.MaxDequeuers, o.Concurrency = 1, 1
	return o
}

// recorder is a middleware that records what it sees.
type recorder struct {
	name  string
	item  *[]string
	mu    *sync.Mutex
	calls []azdispatch.Call
	errs  []error
	ops   []azdispatch.Op
}

func (r *recorder) HandleCall(ctx context.Context, c *azdispatch.Call) error {
	r.mu.Lock()
	*r.item = append(*r.item, r.name+" before")
	r.mu.Unlock()
	err := c.Next(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.item = append(*r.item, r.name+" after")
	r.calls = append(r.calls, *c)
	r.errs = append(r.errs, err)
	return err
}

func (r *recorder) HandleStorage(ctx context.Context, op *azdispatch.StorageOp) error {
	err := op.Next(ctx)
	if op.Kind != azdispatch.OpReceive || len(op.Received) > 0 {
		r.mu.Lock()
		r.ops = append(r.ops, op.Kind)
		r.mu.Unlock()
	}
	return err
}

func TestMiddlewareWrapsEveryHandlerCallInOrder(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New("mw-item", nil)
	pub, err := azdispatch.NewPublisher[item](q, nil)
	require.NoError(t, err)
	for n := range 3 {
		_, err := pub.Send(ctx, item{N: n})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var seq []string
	outer := &recorder{name: "outer", item: &seq, mu: &mu}
	inner := &recorder{name: "inner", item: &seq, mu: &mu}
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[item]) error {
		mu.Lock()
		seq = append(seq, "handler")
		mu.Unlock()
		switch m.Body.N {
		case 1:
			return azdispatch.Permanent(errors.New("no"))
		case 2:
			panic("boom")
		}
		return nil
	}, oneAtATime(quickOptions(outer, inner)))
	require.NoError(t, err)
	s := runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 && s.Poisoned == 1 && s.Retried >= 1 })

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"outer before", "inner before", "handler", "inner after", "outer after"}, seq[:5])
	require.GreaterOrEqual(t, len(inner.calls), 3)
	byN := map[int]int{}
	for i, c := range inner.calls {
		body, ok := c.Body.(*item)
		require.True(t, ok, "Body is a *item, got %T", c.Body)
		byN[body.N] = i
		assert.Equal(t, "mw-item", c.Queue)
		assert.NotEmpty(t, c.ID)
		assert.EqualValues(t, 1, c.DequeueCount)
		assert.Equal(t, len(`{"n":0}`), c.Size)
		assert.Nil(t, c.Metadata, "no metadata was sent")
		assert.Empty(t, c.BatchID)
	}
	assert.NoError(t, inner.errs[byN[0]])
	assert.ErrorAs(t, inner.errs[byN[1]], new(*azdispatch.PermanentError))
	assert.ErrorAs(t, inner.errs[byN[2]], new(*azdispatch.PanicError), "a handler panic reaches middleware as a *PanicError")
	assert.EqualValues(t, 1, s.Panics)
	assert.Contains(t, outer.ops, azdispatch.OpReceive)
	assert.Contains(t, outer.ops, azdispatch.OpDelete)
	assert.Contains(t, outer.ops, azdispatch.OpSend)
	assert.Contains(t, outer.ops, azdispatch.OpUpdate)
}

func TestMiddlewareResultIsJudgedAsTheHandlers(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New("mw-judged", nil)
	_, err := q.Send(ctx, `{"n":1}`, nil)
	require.NoError(t, err)
	_, err = q.Send(ctx, `{"n":2}`, nil)
	require.NoError(t, err)
	var ran atomic.Int64
	refuse := azdispatch.MiddlewareFunc(func(ctx context.Context, c *azdispatch.Call) error {
		switch c.Body.(*item).N {
		case 1:
			return azdispatch.Permanent(errors.New("refused by middleware")) // the handler never runs
		default:
			panic("middleware bug")
		}
	})
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[item]) error {
		ran.Add(1)
		return nil
	}, quickOptions(refuse))
	require.NoError(t, err)
	s := runUntil(t, l, func(s azdispatch.State) bool { return s.Poisoned == 1 && s.Panics >= 1 })
	assert.Zero(t, ran.Load(), "a middleware that does not call Next skips the handler")
	assert.GreaterOrEqual(t, s.Failed, int64(2))
}

func TestNilMiddlewareIsAConfigError(t *testing.T) {
	q := memqueue.New("mw-nil", nil)
	_, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[item]) error { return nil },
		&azdispatch.ListenerOptions{Middleware: []azdispatch.Middleware{nil}})
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	_, err = azdispatch.NewPublisher[item](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{nil}})
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
}

// carry is a send middleware that adds metadata and records the sends.
type carry struct {
	mu   sync.Mutex
	sent []azdispatch.Outgoing
}

func (c *carry) HandleSend(ctx context.Context, s *azdispatch.Outgoing) error {
	s.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	s.Set("tenant", "contoso")
	err := s.Next(ctx)
	c.mu.Lock()
	c.sent = append(c.sent, *s)
	c.mu.Unlock()
	return err
}

func TestMetadataTravelsInTheTextAndReachesMiddleware(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New("mw-meta", nil)
	c := &carry{}
	pub, err := azdispatch.NewPublisher[item](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{c}})
	require.NoError(t, err)
	sent, err := pub.Send(ctx, item{N: 7})
	require.NoError(t, err)
	id := sent.ID

	want := wire.MetaMagic + `{"tenant":"contoso","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}` + "\n" + `{"n":7}`
	ds, err := q.Receive(ctx, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, want, ds[0].Text, "one line of metadata, then the codec's text")
	require.NoError(t, q.SetVisibility(ctx, ds[0], 0))
	c.mu.Lock()
	require.Len(t, c.sent, 1)
	assert.Equal(t, id, c.sent[0].ID)
	assert.Equal(t, len(want), c.sent[0].Size)
	assert.False(t, c.sent[0].Offloaded)
	c.mu.Unlock()

	var mu sync.Mutex
	var seq []string
	r := &recorder{name: "r", item: &seq, mu: &mu}
	var got item
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[item]) error {
		got = m.Body
		return nil
	}, quickOptions(r))
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })
	assert.Equal(t, item{N: 7}, got, "the handler gets the body alone")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, r.calls, 1)
	assert.Equal(t, azdispatch.Metadata{"tenant": "contoso", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, r.calls[0].Metadata)
	assert.Equal(t, len(`{"n":7}`), r.calls[0].Size, "Size is the body's text, metadata not included")
}

func TestMetadataSurvivesPoisonAndRequeue(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New("mw-requeue", nil)
	pub, err := azdispatch.NewPublisher[item](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{&carry{}}})
	require.NoError(t, err)
	_, err = pub.Send(ctx, item{N: 1})
	require.NoError(t, err)
	fail := true
	var mu sync.Mutex
	var seq []string
	r := &recorder{name: "r", item: &seq, mu: &mu}
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[item]) error {
		if fail {
			return azdispatch.Permanent(errors.New("not yet"))
		}
		return nil
	}, quickOptions(r))
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Poisoned == 1 })

	res, err := azdispatch.Requeue(ctx, q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Moved)
	fail = false
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, r.calls, 2)
	assert.Equal(t, r.calls[0].Metadata, r.calls[1].Metadata, "the requeued message carries its metadata")
	assert.Equal(t, "contoso", r.calls[1].Metadata["tenant"])
}

func TestMalformedMetadataIsPoisoned(t *testing.T) {
	ctx := context.Background()
	q := memqueue.New("mw-malformed", nil)
	for _, text := range []string{
		wire.MetaMagic + "{not json}\n{\"n\":1}",
		wire.MetaMagic + strings.Repeat("x", 5000) + "\n{\"n\":1}",
		wire.MetaMagic + "{\"a\":\"b\"}", // no end of line
	} {
		_, err := q.Send(ctx, text, nil)
		require.NoError(t, err)
	}
	var ran atomic.Int64
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[item]) error {
		ran.Add(1)
		return nil
	}, quickOptions())
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Poisoned == 3 })
	assert.Zero(t, ran.Load())
	ds, err := q.PoisonQueue().Receive(ctx, 32, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 3)
	for _, d := range ds {
		env, err := azdispatch.ParsePoison(d.Text)
		require.NoError(t, err)
		assert.Contains(t, env.Reason, "malformed message metadata")
	}
}

func TestPublisherOffloadsTextThatLooksLikeMetadata(t *testing.T) {
	// The text is offloaded (to the memqueue's store) rather than sent as
	// text a listener would take for metadata.
	q := memqueue.New("mw-lookalike", nil)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	s, err := pub.SendWith(context.Background(), wire.MetaMagic+"{}\nhello", nil)
	require.NoError(t, err)
	ds, err := q.Peek(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, s.ID, ds[0].ID)
	assert.NotContains(t, ds[0].Text, "hello", "a pointer went instead")
}

func TestMetadataThatCannotBeCarriedIsRefused(t *testing.T) {
	q := memqueue.New("mw-badmeta", nil)
	for _, bad := range []azdispatch.Metadata{{"": "x"}, {"k": strings.Repeat("v", 5000)}, {"k": "\x00"}} {
		mw := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
			s.Metadata = bad
			return s.Next(ctx)
		})
		pub, err := azdispatch.NewPublisher[item](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{mw}})
		require.NoError(t, err)
		_, err = pub.Send(context.Background(), item{})
		assert.ErrorIs(t, err, azdispatch.ErrBadMetadata, "metadata %q", bad)
	}
	n, err := q.Depth(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was sent")
}

func TestParseMetadata(t *testing.T) {
	meta, rest, err := azdispatch.ParseMetadata("plain text")
	require.NoError(t, err)
	assert.Nil(t, meta)
	assert.Equal(t, "plain text", rest)
	meta, rest, err = azdispatch.ParseMetadata(wire.MetaMagic + "{\"a\":\"1\"}\n" + wire.PointerMagic + "{}")
	require.NoError(t, err)
	assert.Equal(t, azdispatch.Metadata{"a": "1"}, meta)
	assert.Equal(t, wire.PointerMagic+"{}", rest)
	_, _, err = azdispatch.ParseMetadata(wire.MetaMagic + "[1]\n")
	assert.ErrorIs(t, err, azdispatch.ErrBadMetadata)
}

// A send middleware may assign one Metadata map to every send; a later
// Set copies it rather than writing to the shared map.
func TestOutgoingSetCopiesASharedMap(t *testing.T) {
	shared := azdispatch.Metadata{"tenant": "contoso"}
	assign := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		s.Metadata = shared
		return s.Next(ctx)
	})
	stamp := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		s.Set("n", fmt.Sprint(s.Body.(*item).N))
		return s.Next(ctx)
	})
	q := memqueue.New("mw-shared-meta", nil)
	pub, err := azdispatch.NewPublisher[item](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{assign, stamp}})
	require.NoError(t, err)
	var sends sync.WaitGroup
	for n := range 20 {
		sends.Go(func() {
			_, err := pub.Send(context.Background(), item{N: n})
			assert.NoError(t, err)
		})
	}
	sends.Wait()
	assert.Equal(t, azdispatch.Metadata{"tenant": "contoso"}, shared, "the shared map is untouched")
	ds, err := q.Receive(context.Background(), 32, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 20)
	for _, d := range ds {
		meta, _, err := azdispatch.ParseMetadata(d.Text)
		require.NoError(t, err)
		assert.Equal(t, "contoso", meta["tenant"])
		assert.NotEmpty(t, meta["n"])
	}
}
