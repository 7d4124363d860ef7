package azdispatch

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// An envelope's header is JSON an operator reads as it is, with az or
// Storage Explorer: <, > and & stay themselves, not \u003c escapes, and
// the envelope still parses back.
func TestEnvelopeHeaderIsNotHTMLEscaped(t *testing.T) {
	env := newPoisonEnvelope("orders", &Delivery{ID: "m1", Text: `{"a":"<b>"}`}, "quota < 1 && size > 2", time.Now())
	text, err := env.encode()
	require.NoError(t, err)
	header, _, _ := strings.Cut(text, "\n")
	assert.Contains(t, header, `"quota < 1 && size > 2"`)
	assert.NotContains(t, header, `\u003c`)
	back, err := ParsePoison(text)
	require.NoError(t, err)
	assert.Equal(t, env.Reason, back.Reason)
	assert.Equal(t, env.Body, back.Body)
}

// A failed delete of a handled message is logged for what the service
// said: someone else holds it, it may be gone, or it stayed where it was.
func TestDeleteFailureWordsFollowTheAnswer(t *testing.T) {
	stale := &StorageError{Op: OpDelete, StatusCode: http.StatusBadRequest, Code: "PopReceiptMismatch"}
	gone := &StorageError{Op: OpDelete, StatusCode: http.StatusNotFound, Code: "MessageNotFound"}
	busy := &StorageError{Op: OpDelete, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy"}
	assert.Contains(t, deleteFailed(stale), "another receive holds it now")
	assert.Contains(t, deleteFailed(gone), "the receipt is stale")
	assert.NotContains(t, deleteFailed(gone), "will be delivered again")
	assert.Contains(t, deleteFailed(busy), "will be delivered again")
}

// A reason that quotes a body or an error holding U+FFFE or U+FFFF, which
// XML cannot carry, is written escaped: the envelope can be sent, and
// parses back to the same reason.
func TestAnEnvelopeCarriesAReasonHoldingNoncharacters(t *testing.T) {
	t.Parallel()
	reason := "decode: json: cannot unmarshal number \uFFFE into Go value of type int; name \"bad\uFFFF\""
	env := newPoisonEnvelope("orders", &Delivery{ID: "m1", Text: `{"\ufffe":"x"}`}, reason, time.Now())
	text, err := env.encode()
	require.NoError(t, err)
	require.NoError(t, xmltext.Check(text), "a queue message can carry it")
	back, err := ParsePoison(text)
	require.NoError(t, err)
	assert.Equal(t, reason, back.Reason)
	assert.Equal(t, env.Body, back.Body)

	// Poisoned at once, for what its handler said, not after
	// MaxDequeueCount refused moves.
	q := testQueue(t)
	sendTexts(t, q, 1, func(int) string { return `{"name":"bad\ufffe"}` })
	type customer struct {
		Name string `json:"name"`
	}
	var calls atomic.Int32
	l, err := NewListener(q, func(_ context.Context, m *Message[customer]) error {
		calls.Add(1)
		return Permanent(fmt.Errorf("no customer %s", m.Body.Name))
	}, quick())
	require.NoError(t, err)
	got := poisonedOnce(t, q, l)
	assert.Equal(t, "permanent: no customer bad\uFFFE", got.Reason)
	assert.EqualValues(t, 1, calls.Load())
	assert.Zero(t, l.State().PoisonErrors)
}
