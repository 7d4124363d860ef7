package azdispatch

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/txcount"
)

// refused is the error a storage call gets when the service answers status
// and code to method on rawURL.
func refused(o Op, queue string, status int, code, method, rawURL string) error {
	u, _ := url.Parse(rawURL)
	resp := &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{"X-Ms-Error-Code": {code}},
		Request:    &http.Request{Method: method, URL: u},
		Body:       http.NoBody,
	}
	return storageError(o, queue, runtime.NewResponseError(resp))
}

func TestPermissionHintNamesWhatTheOperationNeeds(t *testing.T) {
	t.Parallel()
	const q, b = "https://a.queue.core.windows.net/orders", "https://a.blob.core.windows.net/azdispatch-payloads"
	blobErr := func(id string, err error) error {
		se := err.(*StorageError)
		se.Queue, se.Blob = "", "azdispatch-payloads/"+id
		return se
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{refused(OpDelete, "orders", 403, "AuthorizationPermissionMismatch", "DELETE", q+"/messages/1?popreceipt=x"),
			`azdispatch: delete on queue "orders": 403 AuthorizationPermissionMismatch (the credential needs the Process permission on the queue)`},
		{refused(OpSend, "orders", 403, "AuthorizationPermissionMismatch", "POST", q+"/messages"),
			`azdispatch: send on queue "orders": 403 AuthorizationPermissionMismatch (the credential needs the Add permission on the queue)`},
		{refused(OpUpdate, "orders", 403, "AuthorizationPermissionMismatch", "PUT", q+"/messages/1?popreceipt=x"),
			`azdispatch: update on queue "orders": 403 AuthorizationPermissionMismatch (the credential needs the Update permission on the queue)`},
		{refused(OpDepth, "orders", 403, "AuthorizationResourceTypeMismatch", "GET", q+"?comp=metadata"),
			`azdispatch: depth on queue "orders": 403 AuthorizationResourceTypeMismatch (an account SAS needs the Container resource type for this)`},
		{refused(OpUpdate, "orders", 403, "AuthorizationResourceTypeMismatch", "PUT", q+"/messages/1?popreceipt=x"),
			`azdispatch: update on queue "orders": 403 AuthorizationResourceTypeMismatch (an account SAS needs the Object resource type for this; Azurite asks for the Container resource type)`},
		{refused(OpReceive, "orders", 403, "AuthorizationServiceMismatch", "GET", q+"/messages"),
			`azdispatch: receive on queue "orders": 403 AuthorizationServiceMismatch (an account SAS needs the Queue service for this)`},
		{refused(opCreate, "orders", 403, "AuthorizationFailure", "PUT", q),
			`azdispatch: create on queue "orders": 403 AuthorizationFailure (the credential needs the Create permission on the queue; or the account's network rules refuse this client)`},
		{blobErr("", refused(opBlobWrite, "", 403, "AuthorizationPermissionMismatch", "PUT", b+"?restype=container")),
			`azdispatch: blob write on blob "azdispatch-payloads/": 403 AuthorizationPermissionMismatch (the credential needs the Create permission on the container)`},
		{blobErr("x", refused(opBlobWrite, "", 403, "AuthorizationPermissionMismatch", "PUT", b+"/x?comp=metadata")),
			`azdispatch: blob write on blob "azdispatch-payloads/x": 403 AuthorizationPermissionMismatch (the credential needs the Write permission on the blob)`},
		{blobErr("x", refused(opBlobWrite, "", 403, "AuthorizationPermissionMismatch", "PUT", b+"/x")),
			`azdispatch: blob write on blob "azdispatch-payloads/x": 403 AuthorizationPermissionMismatch (the credential needs the Create permission on the blob)`},
		{blobErr("x", refused(opBlobRead, "", 403, "AuthorizationServiceMismatch", "GET", b+"/x")),
			`azdispatch: blob read on blob "azdispatch-payloads/x": 403 AuthorizationServiceMismatch (an account SAS needs the Blob service for this)`},
		{blobErr("", refused(opBlobList, "", 403, "AuthorizationPermissionMismatch", "GET", b+"?restype=container&comp=list")),
			`azdispatch: blob list on blob "azdispatch-payloads/": 403 AuthorizationPermissionMismatch (the credential needs the List permission on the container)`},
		// Not a refusal for want of a permission: the credential itself
		// was refused, and the error says what makes that happen.
		{refused(OpSend, "orders", 403, "AuthenticationFailed", "POST", q+"/messages"),
			`azdispatch: send on queue "orders": 403 AuthenticationFailed (the credential was refused: a wrong key, an expired or altered SAS, or this machine's clock is more than 15 minutes off the service's)`},
		{refused(OpSend, "orders", 404, "QueueNotFound", "POST", q+"/messages"),
			`azdispatch: send on queue "orders": 404 QueueNotFound`},
		{refused(opOther, "orders", 403, "AuthorizationPermissionMismatch", "GET", q),
			`azdispatch: other on queue "orders": 403 AuthorizationPermissionMismatch`},
	} {
		assert.EqualError(t, c.err, c.want)
	}
}

// The permission table names requests by Op's values: every request that
// can be refused for a permission has a hint, so a renamed Op cannot
// silently lose its hint.
func TestEveryOpHasAPermissionHint(t *testing.T) {
	for _, o := range []Op{OpReceive, OpDelete, OpUpdate, OpSend, OpDepth, opCreate, opBlobRead, opBlobWrite, opBlobDelete, opBlobLease, opBlobList} {
		se := &StorageError{Op: o, StatusCode: http.StatusForbidden, Code: "AuthorizationPermissionMismatch"}
		assert.NotEmpty(t, se.permissionHint(), "%s", o)
		assert.NotEqual(t, txcount.Other, txcount.Named(string(o)), "%s is counted as itself", o)
	}
}

// Against the emulator: a wrong account key, on a queue send and on the
// blob write of a claim check, says the key was refused, not that a
// permission is missing; an expired SAS says the token was refused.
func TestARefusedCredentialSaysWhichAndWhy(t *testing.T) {
	t.Parallel()
	needStorage(t)
	ctx := context.Background()
	wrong, err := NewAccountWithSharedKey(emulatorFor(t).QueueEndpoint(), "devstoreaccount1", "QUJDRA==",
		&AccountOptions{BlobServiceURL: emulatorFor(t).BlobEndpoint()})
	require.NoError(t, err)
	q, err := wrong.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = q.Send(ctx, "x", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the account key is wrong")
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	_, err = p.Send(ctx, strings.Repeat("x", MaxMessageSize+1)) // a claim check: a blob write first
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the account key is wrong")
	assert.NotContains(t, err.Error(), "permission on the blob")

	cred, err := azqueue.NewSharedKeyCredential("devstoreaccount1", emulatorKey)
	require.NoError(t, err)
	perms, res := sasPermissions(), sasResources()
	expired, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: time.Now().Add(-2 * time.Hour), ExpiryTime: time.Now().Add(-time.Hour),
		Permissions: perms.String(), ResourceTypes: res.String(),
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	a, err := NewAccountWithSAS(emulatorFor(t).QueueEndpoint()+"?"+expired.Encode(), nil)
	require.NoError(t, err)
	eq, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = eq.Send(ctx, "x", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the SAS token was refused: it expired at", "judged by its se on the service's clock")
	assert.NotContains(t, err.Error(), "sig=")

	// The same token altered (its signature changed) is within its times:
	// the signature is what was refused.
	signed, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: time.Now().Add(-time.Hour), ExpiryTime: time.Now().Add(time.Hour),
		Permissions: perms.String(), ResourceTypes: res.String(),
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	query := strings.Replace(signed.Encode(), "sig=", "sig=A", 1)
	a, err = NewAccountWithSAS(emulatorFor(t).QueueEndpoint()+"?"+query, nil)
	require.NoError(t, err)
	aq, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = aq.Send(ctx, "x", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "its signature does not match")
	assert.NotContains(t, err.Error(), "sig=")
}
