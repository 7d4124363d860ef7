package azdispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noSource is a Source that is never called: the allocation test below
// needs a listener, not a queue.
type noSource struct{}

func (noSource) Name() string { return "none" }
func (noSource) Receive(context.Context, int, time.Duration) ([]*Delivery, error) {
	return nil, nil
}
func (noSource) Delete(context.Context, *Delivery) error                       { return nil }
func (noSource) SetVisibility(context.Context, *Delivery, time.Duration) error { return nil }
func (noSource) Depth(context.Context) (int, error)                            { return 0, nil }

// A listener without middleware calls the handler directly: the seam costs
// no allocation per message. One that has middleware makes one Call per
// handler call. (BenchmarkOverhead's listener and listener-mw lines show
// the same for whole messages.)
func TestMiddlewareSeamAllocations(t *testing.T) {
	handler := func(context.Context, *Message[job]) error { return nil }
	passThrough := MiddlewareFunc(func(ctx context.Context, c *Call) error { return c.Next(ctx) })
	for _, tc := range []struct {
		name   string
		mw     []Middleware
		allocs float64
	}{
		{"none", nil, 0},
		{"one pass-through", []Middleware{passThrough}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewListener(noSource{}, handler, &ListenerOptions{PoisonQueue: &Queue{}, Middleware: tc.mw})
			require.NoError(t, err)
			tr := &try{}
			c := &handlerCall{Context: context.Background(), try: tr}
			m := &Message[job]{MessageInfo: MessageInfo{ID: "1"}}
			got := testing.AllocsPerRun(1000, func() {
				if err := l.callChain(c, tr, m, 10); err != nil {
					t.Fatal(err)
				}
			})
			assert.Equal(t, tc.allocs, got)
		})
	}
}
