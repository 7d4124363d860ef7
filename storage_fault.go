package azdispatch

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
)

// maxRetryAfter caps the wait a Retry-After hint can impose: the service
// asks for seconds, and a broken or hostile proxy must not park a listener
// for hours.
const maxRetryAfter = 5 * time.Minute

// Fatal reports whether the error is one that retrying will not fix until
// someone changes something: the credential is refused (401, or 403 for a
// revoked key, an expired SAS, a missing role, a disabled account), or the
// queue is gone (404 QueueNotFound, except on a delete or update, where it
// means ownership lost), being deleted, or disabled. Throttling, timeouts,
// 5xx answers and transport failures are transient; other 4xx answers are
// about one request, not the listener.
func (e *StorageError) Fatal() bool {
	switch e.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return true
	}
	switch queueerror.Code(e.Code) {
	case queueerror.QueueBeingDeleted, queueerror.QueueDisabled, queueerror.AccountIsDisabled:
		return true
	case queueerror.QueueNotFound:
		return !e.ownershipLost()
	}
	return false
}

// retryAfter reads the service's hint of when to try again from a failed
// response: retry-after-ms, x-ms-retry-after-ms, then Retry-After in seconds
// or as an HTTP date, as the Azure SDK's retry policy reads them. Zero when
// there is none.
func retryAfter(re *azcore.ResponseError) time.Duration {
	if re == nil || re.RawResponse == nil {
		return 0
	}
	h := re.RawResponse.Header
	for _, name := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		if v := h.Get(name); v != "" {
			if ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && ms > 0 {
				return min(time.Duration(ms)*time.Millisecond, maxRetryAfter)
			}
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return min(time.Duration(min(s, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(at), 0), maxRetryAfter)
	}
	return 0
}

// hintedWait is the wait after err: at least the service's Retry-After, if
// err carries one, and otherwise wait.
func hintedWait(err error, wait time.Duration) time.Duration {
	var se *StorageError
	if errors.As(err, &se) && se.RetryAfter > wait {
		return se.RetryAfter
	}
	return wait
}
