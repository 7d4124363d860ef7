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
