package sasperm

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A refusal for want of a permission names the permission; a blob write
// is told apart by its request; anything but a 403 has no hint.
func TestHintNamesWhatTheRequestNeeded(t *testing.T) {
	assert.Equal(t, " (the credential needs the Process permission on the queue)",
		Hint("receive", http.StatusForbidden, "AuthorizationPermissionMismatch", nil))
	createContainer := httptest.NewRequest(http.MethodPut, "https://acct.blob.core.windows.net/payloads?restype=container", nil)
	assert.Contains(t, Hint("blob write", http.StatusForbidden, "AuthorizationPermissionMismatch", createContainer), "Create permission on the container")
	setMetadata := httptest.NewRequest(http.MethodPut, "https://acct.blob.core.windows.net/payloads/b?comp=metadata", nil)
	assert.Contains(t, Hint("blob write", http.StatusForbidden, "AuthorizationPermissionMismatch", setMetadata), "Write permission on the blob")
	assert.Contains(t, Hint("delete", http.StatusForbidden, "AuthorizationResourceTypeMismatch", nil), "Object resource type")
	assert.Empty(t, Hint("receive", http.StatusServiceUnavailable, "ServerBusy", nil))
	assert.Empty(t, Hint("no such request", http.StatusForbidden, "AuthorizationPermissionMismatch", nil))
}

// A credential refused as a whole (its signature) is told apart from a
// missing permission, and the reason names the credential: with an account
// key there are no permissions to lack. (A wrong key on a blob write said
// it needed the Create permission.)
func TestARefusedSignatureIsToldApartFromAMissingPermission(t *testing.T) {
	key := httptest.NewRequest(http.MethodPut, "https://acct.blob.core.windows.net/payloads/b", nil)
	key.Header.Set("Authorization", "SharedKey acct:c2ln")
	sas := httptest.NewRequest(http.MethodPost, "https://acct.queue.core.windows.net/q/messages?sv=1&se=2020-01-01&sig=x", nil)
	bearer := httptest.NewRequest(http.MethodPost, "https://acct.queue.core.windows.net/q/messages", nil)
	bearer.Header.Set("Authorization", "Bearer eyJ")
	const authMsg = "Server failed to authenticate the request. Make sure the value of the Authorization header is formed correctly including the signature."

	got := Explain("blob write", 403, "AuthorizationFailure", authMsg, answer(key, ""))
	assert.Contains(t, got, "the account key is wrong")
	assert.NotContains(t, got, "permission on", "a key has no permissions to lack")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(key, "")), "the account key is wrong")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(sas, "")), "expired or is not valid yet", "no Date: it cannot tell")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(bearer, "")), "Entra token was refused")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, nil), "15 minutes")

	assert.Contains(t, Explain("send", 403, "AuthorizationPermissionMismatch", "not authorized", answer(sas, "")), "needs the Add permission")
	assert.Contains(t, Explain("blob write", 403, "AuthorizationFailure", "This request is not authorized to perform this operation.", answer(key, "")), "network rules")
	assert.Empty(t, Explain("send", 503, "ServerBusy", "", answer(sas, "")))
}

// answer is the service's answer to req, dated date ("" for none).
func answer(req *http.Request, date string) *http.Response {
	resp := &http.Response{Request: req, Header: http.Header{}}
	if date != "" {
		resp.Header.Set("Date", date)
	}
	return resp
}

// A refused SAS is judged by its times on the service's clock (the
// answer's Date): expired, not valid yet, or, within its times, signed
// wrong. (An expired and an altered token read alike.)
func TestARefusedSASSaysWhetherItsTimeOrItsSignature(t *testing.T) {
	const authMsg = "Server failed to authenticate the request."
	sas := func(query string) *http.Request {
		return httptest.NewRequest(http.MethodPost, "https://acct.queue.core.windows.net/q/messages?sv=1&"+query+"&sig=x", nil)
	}
	const date = "Fri, 27 Nov 2026 16:00:00 GMT"
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(sas("se=2026-11-27T15:00:00Z"), date)),
		"it expired at 2026-11-27T15:00:00Z (its se), and the service's time is 2026-11-27T16:00:00Z")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(sas("st=2026-11-27T17:00Z&se=2026-11-28"), date)),
		"it is not valid until 2026-11-27T17:00:00Z (its st)")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(sas("st=2026-11-27T15:00:00Z&se=2026-11-27T17:00:00Z"), date)),
		"its signature does not match")
	assert.Contains(t, Explain("send", 403, "AuthenticationFailed", authMsg, answer(sas("se=yesterday"), date)),
		"expired or is not valid yet", "times it cannot read: it cannot tell")
}

// An HTTPS-only SAS sent over HTTP (to an emulator) says so.
func TestAnHTTPSOnlySASOverHTTPSaysSo(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:10001/devstoreaccount1/q/messages?sv=1&spr=https&sig=x", nil)
	assert.Contains(t, Explain("send", 403, "AuthorizationProtocolMismatch", "", answer(req, "")), "allows HTTPS only (spr=https)")
}
