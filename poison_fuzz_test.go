package azdispatch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/allocs"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// FuzzParsePoison feeds ParsePoison the text of a poison queue's message,
// which anyone who can send to that queue writes. What it refuses matches
// ErrNotPoison; what it accepts keeps the body byte for byte, and writes
// back to an envelope that reads as the same one (its reason shortened, if
// need be, to keep the header within its reserve), and then to itself.
func FuzzParsePoison(f *testing.F) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	env := &PoisonEnvelope{Queue: "orders", MessageID: "id-1", DequeueCount: 5, Reason: "decode: bad", InsertedAt: at, PoisonedAt: at, Body: `{"n":1}`}
	text, err := env.encode()
	require.NoError(f, err)
	item := *env
	item.Batch, item.Item, item.Body = strings.Repeat("0f", 16), 7, "line1\nline2\n"
	itemText, err := item.encode()
	require.NoError(f, err)
	for _, s := range []string{
		text,
		itemText,
		wire.PoisonMagic + "{}\n",
		wire.PoisonMagic + "null\nbody",
		wire.PoisonMagic + `{"QUEUE":"q","dequeue_count":1e2}` + "\nbody",
		wire.PoisonMagic + `{"inserted_at":"2026-01-02T03:04:05.123+23:59"}` + "\n\xff\x00",
		wire.PoisonMagic + `{"reason":"` + strings.Repeat("r", 2000) + `"}` + "\n",
		wire.PoisonMagic + `{"id":"` + strings.Repeat("i", 2000) + `"}` + "\n",
		wire.PoisonMagic + "{not json\nbody",
		wire.PoisonMagic + "no newline",
		"not an envelope",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		// Not parallel: other work would count in the allocation bound.
		var env *PoisonEnvelope
		var err error
		spent := allocs.Bytes(func() { env, err = ParsePoison(text) })
		assert.LessOrEqual(t, spent, uint64(64<<10+8*len(text)), "allocated for %d bytes of text", len(text))
		if err != nil {
			require.ErrorIs(t, err, ErrNotPoison)
			require.Nil(t, env)
			return
		}
		require.True(t, strings.HasPrefix(text, wire.PoisonMagic))
		_, body, _ := strings.Cut(text, "\n")
		assert.Equal(t, body, env.Body, "the body is kept byte for byte")

		again, err := env.encode()
		if err != nil {
			// Only a header too long without its reason does not fit.
			h := *env
			h.Reason = ""
			header, jerr := json.Marshal(&h)
			require.NoError(t, jerr)
			assert.Greater(t, wire.EnvelopeHeadLen(len(header)), poisonHeaderReserve, "%v", err)
			return
		}
		header, _, _ := strings.Cut(again, "\n")
		assert.LessOrEqual(t, len(header)+1, poisonHeaderReserve)
		back, err := ParsePoison(again)
		require.NoError(t, err, "wrote %q", again)
		assert.True(t, strings.HasPrefix(env.Reason, back.Reason), "the reason is shortened, never changed")
		assertSameEnvelope(t, env, back)
		fixed, err := back.encode()
		require.NoError(t, err)
		assert.Equal(t, again, fixed, "an envelope written writes back as itself")
	})
}

// assertSameEnvelope checks that got is want, but for a reason that may be
// shortened and times that need only be the same instant.
func assertSameEnvelope(t *testing.T, want, got *PoisonEnvelope) {
	t.Helper()
	assert.True(t, want.InsertedAt.Equal(got.InsertedAt), "InsertedAt %v, then %v", want.InsertedAt, got.InsertedAt)
	assert.True(t, want.PoisonedAt.Equal(got.PoisonedAt), "PoisonedAt %v, then %v", want.PoisonedAt, got.PoisonedAt)
	w, g := *want, *got
	w.InsertedAt, w.PoisonedAt, w.Reason = g.InsertedAt, g.PoisonedAt, g.Reason
	assert.Equal(t, w, g)
}
