package azdispatch

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
