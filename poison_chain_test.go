package azdispatch

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

	"github.com/azdispatch/azdispatch/internal/wire"
)

// withEarlier adds the earlier IDs to a text's metadata, keeping what it
// carried and its body, and leaves alone a text it would harm.
func TestWithEarlierAddsTheIDsToTheMetadata(t *testing.T) {
	t.Parallel()
	big := wire.MetaMagic + "{}\n" + strings.Repeat("x", MaxMessageSize-30)
	cases := []struct {
		name, text string
		ids        []string
		wantMeta   Metadata // nil: the text comes back unchanged
		wantBody   string
	}{
		{"a codec's text alone: unchanged", `{"n":1}`, []string{"a1"}, nil, ""},
		{"an empty metadata line", wire.MetaMagic + "{}\n{\"n\":1}", []string{"a1"}, Metadata{MetadataRequeuedFrom: "a1"}, `{"n":1}`},
		{"a trace context kept", wire.MetaMagic + "{\"traceparent\":\"00-x\"}\n{\"n\":1}", []string{"a1"},
			Metadata{"traceparent": "00-x", MetadataRequeuedFrom: "a1"}, `{"n":1}`},
		{"earlier IDs replaced, oldest first", wire.MetaMagic + "{\"azdispatch-requeued-from\":\"a0\"}\nbody", []string{"a0", "a1"},
			Metadata{MetadataRequeuedFrom: "a0 a1"}, "body"},
		{"the latest kept", wire.MetaMagic + "{}\nbody", []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"},
			Metadata{MetadataRequeuedFrom: "3 4 5 6 7 8 9 10"}, "body"},
		{"not IDs left out", wire.MetaMagic + "{}\nbody", []string{"a b", "", strings.Repeat("z", 65), "ok\x00", "good"},
			Metadata{MetadataRequeuedFrom: "good"}, "body"},
		{"a pointer keeps its line", wire.PointerMagic + "{}", []string{"a1"}, Metadata{MetadataRequeuedFrom: "a1"}, wire.PointerMagic + "{}"},
		{"malformed metadata: unchanged", wire.MetaMagic + "{oops\nbody", []string{"a1"}, nil, ""},
		{"no ID: unchanged", wire.MetaMagic + "{}\nbody", nil, nil, ""},
		{"too large with the line: unchanged", big, []string{"a1"}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := withEarlier(c.text, c.ids)
			if c.wantMeta == nil {
				assert.Equal(t, c.text, got)
				return
			}
			_, got, _ = wire.CutDue(got)
			meta, body, err := ParseMetadata(got)
			require.NoError(t, err)
			assert.Equal(t, c.wantMeta, meta)
			assert.Equal(t, c.wantBody, body)
			assert.Equal(t, cleanEarlier(c.ids), earlierIn(got), "read back as written")
		})
	}
}

// An envelope names the earlier IDs it carries; one written before the
// field existed decodes with none; a header too long for its room drops
// the older IDs before it shortens the reason.
func TestEnvelopeEarlierIDs(t *testing.T) {
	t.Parallel()
	old := wire.PoisonMagic + "{\"queue\":\"q\",\"id\":\"m2\",\"dequeue_count\":5,\"reason\":\"r\"}\nbody"
	env, err := ParsePoison(old)
	require.NoError(t, err)
	assert.Nil(t, env.Earlier, "an envelope from before the field decodes")
	assert.Equal(t, "m2", env.MessageID)

	env = &PoisonEnvelope{Queue: "q", MessageID: "m2", Reason: "r", Earlier: []string{"m0", "m1"}, Body: "body"}
	text, err := env.encode()
	require.NoError(t, err)
	back, err := ParsePoison(text)
	require.NoError(t, err)
	assert.Equal(t, []string{"m0", "m1"}, back.Earlier)
	assert.Equal(t, "body", back.Body)

	long := strings.Repeat(strings.Repeat("e", maxEarlierID)+" ", MaxEarlierIDs)
	env = &PoisonEnvelope{Queue: strings.Repeat("q", 63), MessageID: strings.Repeat("i", 64), Reason: strings.Repeat("why ", 100),
		Earlier: cleanEarlier(strings.Fields(long)), Batch: strings.Repeat("b", 80), Body: "body"}
	text, err = env.encode()
	require.NoError(t, err)
	header, _, _ := strings.Cut(text, "\n")
	assert.LessOrEqual(t, len(header)+1, poisonHeaderReserve)
	back, err = ParsePoison(text)
	require.NoError(t, err)
	assert.Len(t, back.Earlier, 1, "the latest earlier ID kept")
	assert.NotEmpty(t, back.Reason)
}

// The handler's middleware does not see the earlier IDs: they name the
// message's past, and a handler forwarding its metadata must not pass
// them on.
func TestSenderMetadataLeavesTheEarlierIDsOut(t *testing.T) {
	t.Parallel()
	assert.Nil(t, senderMetadata(nil))
	assert.Nil(t, senderMetadata(Metadata{MetadataRequeuedFrom: "a"}))
	assert.Equal(t, Metadata{"k": "v"}, senderMetadata(Metadata{"k": "v", MetadataRequeuedFrom: "a"}))
	m := Metadata{"k": "v"}
	assert.Equal(t, m, senderMetadata(m))
}

// Against Azurite: a message poisoned, requeued and poisoned again has an
// envelope that names the ID it had the first time; once more, both. The
// handler never sees the IDs in its metadata, and its sender's metadata
// travels as before.
func TestARepoisonedMessageNamesItsEarlierIDs(t *testing.T) {
	needStorage(t)
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	tag := SendMiddlewareFunc(func(ctx context.Context, s *Outgoing) error {
		s.Metadata = Metadata{"tenant": "contoso"}
		return s.Next(ctx)
	})
	pub, err := NewPublisher[note](q, &PublisherOptions{Middleware: []SendMiddleware{tag}})
	require.NoError(t, err)
	_, err = pub.Send(ctx, note{N: 17})
	require.NoError(t, err)

	var mu sync.Mutex
	var seen []Metadata
	watch := MiddlewareFunc(func(ctx context.Context, c *Call) error {
		mu.Lock()
		seen = append(seen, c.Metadata)
		mu.Unlock()
		return c.Next(ctx)
	})
	l, err := NewListener(q, func(context.Context, *Message[note]) error {
		return Permanent(errors.New("payment declined for order 17"))
	}, &ListenerOptions{Middleware: []Middleware{watch}, Scaling: ScalingOptions{Idle: quick().Scaling.Idle}})
	require.NoError(t, err)
	stop := started(t, l)

	var ids []string // the message's IDs, one per time it was poisoned
	for round := 1; round <= 3; round++ {
		waitFor(t, fmt.Sprintf("poisoned %d times", round), func() bool { return l.State().Poisoned == int64(round) })
		envs := poisonEnvelopes(t, q)
		require.Len(t, envs, 1)
		env := envs[0]
		if len(ids) == 0 {
			assert.Nil(t, env.Earlier, "never requeued: no earlier ID")
		} else {
			assert.Equal(t, ids, env.Earlier, "round %d names the IDs it had", round)
		}
		assert.NotContains(t, ids, env.MessageID, "a new message each time")
		ids = append(ids, env.MessageID)
		if round == 3 {
			break
		}
		// Put the envelope back and requeue it, as an operator would.
		text, err := env.encode()
		require.NoError(t, err)
		_, err = q.poisonQueue().Send(ctx, text, nil)
		require.NoError(t, err)
		// Max 1: the listener, still running, poisons the requeued message
		// at once, and a Requeue over the whole queue would move it again.
		res, err := Requeue(ctx, q.poisonQueue(), q, &RequeueOptions{Max: 1})
		require.NoError(t, err)
		require.Equal(t, 1, res.Moved, "round %d: %+v, state %+v", round, res, l.State())
	}
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	for _, m := range seen {
		assert.Equal(t, Metadata{"tenant": "contoso"}, m, "the handler sees its sender's metadata only")
	}
}

// KeepText requeues the text byte for byte, without the earlier IDs.
func TestRequeueKeepTextSendsTheTextAsItWas(t *testing.T) {
	needStorage(t)
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	env := &PoisonEnvelope{Queue: q.Name(), MessageID: "m1", Reason: "r", InsertedAt: time.Now(), PoisonedAt: time.Now(), Body: `{"n":1}`}
	text, err := env.encode()
	require.NoError(t, err)
	require.NoError(t, q.poisonQueue().Create(ctx))
	_, err = q.poisonQueue().Send(ctx, text, nil)
	require.NoError(t, err)
	res, err := Requeue(ctx, q.poisonQueue(), q, &RequeueOptions{KeepText: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved)
	back, err := q.Receive(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, back, 1)
	assert.Equal(t, `{"n":1}`, back[0].Text)
}

// A delayed message's earlier IDs go after its due line, where a listener
// reads metadata, and are read back from there.
func TestWithEarlierKeepsADueLineFirst(t *testing.T) {
	t.Parallel()
	due := (&wire.DueLine{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).Encode()
	got := withEarlier(due+`{"n":1}`, []string{"a1"})
	line, rest, err := wire.CutDue(got)
	require.NoError(t, err)
	require.NotNil(t, line, "the due line stays first")
	meta, body, err := ParseMetadata(rest)
	require.NoError(t, err)
	assert.Equal(t, Metadata{MetadataRequeuedFrom: "a1"}, meta)
	assert.Equal(t, `{"n":1}`, body)
	assert.Equal(t, []string{"a1"}, earlierIn(got))
}
