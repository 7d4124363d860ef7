package azdispatch

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

func TestPoisonEnvelopeRoundTripsAnyBody(t *testing.T) {
	t.Parallel()
	inserted := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, body := range []string{"", "plain", "line1\nline2\n", `{"json":true}`, wire.PoisonMagic + "{}\nnested", "ünïcödé ✓ 𝄞"} {
		d := &Delivery{ID: "id-1", Text: body, DequeueCount: 4, InsertedAt: inserted}
		text, err := newPoisonEnvelope("orders", d, "why\nnot", time.Now()).encode()
		require.NoError(t, err)
		env, err := ParsePoison(text)
		require.NoError(t, err)
		assert.Equal(t, body, env.Body)
		assert.Equal(t, "orders", env.Queue)
		assert.Equal(t, "id-1", env.MessageID)
		assert.EqualValues(t, 4, env.DequeueCount)
		assert.Equal(t, "why\nnot", env.Reason)
		assert.Equal(t, inserted, env.InsertedAt)
	}
}

func TestPoisonEnvelopeHeaderStaysWithinItsReserve(t *testing.T) {
	t.Parallel()
	d := &Delivery{ID: strings.Repeat("i", 64), Text: strings.Repeat("b", MaxMessageSize)}
	for _, reason := range []string{strings.Repeat("r", 5000), strings.Repeat("\x01", 3000), strings.Repeat("é", 2000)} {
		text, err := newPoisonEnvelope(strings.Repeat("q", 63), d, reason, time.Now()).encode()
		require.NoError(t, err)
		assert.LessOrEqual(t, len(text), serviceMessageLimit, "a publisher's largest message still fits")
		env, err := ParsePoison(text)
		require.NoError(t, err)
		assert.NotEmpty(t, env.Reason, "shortened, not dropped")
		assert.True(t, strings.HasPrefix(reason, env.Reason))
		assert.Equal(t, d.Text, env.Body)
	}
}

func TestParsePoisonRejectsOtherText(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "hello", wire.PoisonMagic + "no newline", wire.PoisonMagic + "{not json\nbody"} {
		_, err := ParsePoison(text)
		assert.ErrorIs(t, err, ErrNotPoison, "%q", text)
	}
}

func TestRequeueMovesPoisonedMessagesBackWithTheirBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendJobs(t, q, 3)
	sendTexts(t, q.poisonQueue(), 1, func(int) string { return "not an envelope" })

	var broken atomic.Bool
	broken.Store(true)
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error {
		if broken.Load() {
			return Permanent(errors.New("downstream rejects it"))
		}
		return nil
	}), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all poisoned", func() bool { return l.State().Poisoned == 3 })
	broken.Store(false) // the fix is deployed

	res, err := Requeue(ctx, q.poisonQueue(), q, &RequeueOptions{
		Filter: func(env *PoisonEnvelope) bool { return !strings.Contains(env.Body, `"n":2`) },
	})
	require.NoError(t, err)
	assert.Equal(t, RequeueResult{Moved: 2, Skipped: 1, Invalid: 1}, res)
	waitFor(t, "requeued handled", func() bool { return l.State().Succeeded == 2 })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	assert.Equal(t, 2, c.callsOf(0), "poisoned once, then handled")
	assert.Equal(t, 2, c.callsOf(1))
	assert.Equal(t, 1, c.callsOf(2), "left in the poison queue")
	assert.Equal(t, 2, depth(t, q.poisonQueue()), "the skipped envelope and the foreign message stay")

	res, err = Requeue(ctx, q.poisonQueue(), q, &RequeueOptions{Max: 1})
	require.NoError(t, err)
	assert.LessOrEqual(t, res.Moved, 1)
}
