package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"
)

// maxRetryAfter caps the wait a Retry-After hint can impose: the service
// asks for seconds, and a broken or hostile proxy must not park a listener
// for hours.
const maxRetryAfter = 5 * time.Minute

// How every part of the package reads a failed storage request, in one
// place: whether it is fatal (see [StorageError.Fatal]), whether it says
// ownership was lost (a message's pop receipt, a lease), whether it is
// the shard's fault or the caller's, whether the service throttles, and
// what a blob or queue request found missing or taken.

// answer is a failed request's reply as the classification reads it: its
// HTTP status (0 when no answer came back) and the service's error code.
type answer struct {
	status int
	code   string
}

// answerOf reads err's answer, from a [*StorageError] or the SDK's
// [*azcore.ResponseError]; the zero answer (no status) for anything else.
func answerOf(err error) answer {
	var se *StorageError
	if errors.As(err, &se) {
		return answer{se.StatusCode, se.Code}
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return answer{re.StatusCode, re.ErrorCode}
	}
	return answer{}
}

// Fatal reports whether the error is one that retrying will not fix until
// someone changes something: the credential is refused (401, or 403 for a
// revoked key, an expired SAS, a missing role, a disabled account), or the
// queue is gone (404 QueueNotFound, except on a delete or update, where it
// means ownership lost), being deleted, or disabled. Throttling, timeouts,
// 5xx answers and transport failures are transient; other 4xx answers are
// about one request, not the listener.
func (e *StorageError) Fatal() bool { return answer{e.StatusCode, e.Code}.fatal(e.Op) }

func (a answer) fatal(o Op) bool {
	switch a.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return true
	}
	switch queueerror.Code(a.code) {
	case queueerror.QueueBeingDeleted, queueerror.QueueDisabled, queueerror.AccountIsDisabled:
		return true
	case queueerror.QueueNotFound:
		return !a.receiptStale(o)
	}
	return false
}

// receiptStale reports whether a delete or update (o) was refused because
// its pop receipt is stale: the message is someone else's now
// ([ErrOwnershipLost]). Azurite answers 400 PopReceiptMismatch, the service
// 404 MessageNotFound, and 404 QueueNotFound for a queue deleted under it.
func (a answer) receiptStale(o Op) bool {
	if o != OpDelete && o != OpUpdate {
		return false
	}
	switch queueerror.Code(a.code) {
	case queueerror.PopReceiptMismatch, queueerror.MessageNotFound, queueerror.QueueNotFound:
		return true
	}
	return false
}

// leaseGone: the service answered that this holder's lease is not the
// blob's lease any more (another ID, expired and taken, broken, or the blob
// is gone). Throttling and timeouts are not proof and are retried.
func leaseGone(err error) bool {
	s := answerOf(err).status
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}

// held: another contender holds the lease (409 LeaseAlreadyPresent).
func held(err error) bool { return answerOf(err).status == http.StatusConflict }

// missing: the container or blob does not exist yet.
func missing(err error) bool { return answerOf(err).status == http.StatusNotFound }

// conflict: it exists already, or is leased by someone else (both fine for
// creation).
func conflict(err error) bool {
	s := answerOf(err).status
	return s == http.StatusConflict || s == http.StatusPreconditionFailed
}

// isQueueNotFound reports whether err says the queue does not exist.
func isQueueNotFound(err error) bool {
	return queueerror.Code(answerOf(err).code) == queueerror.QueueNotFound
}

// throttled reports whether err is the service throttling: 503 ServerBusy.
func throttled(err error) bool {
	a := answerOf(err)
	return a.status == http.StatusServiceUnavailable && a.code == "ServerBusy"
}

// fault classifies an error of a shard request: whether it says the shard
// is unwell (so it should be backed off), and whether it says the whole
// account endpoint is (a transport failure: refused connection, DNS,
// timeout, with no HTTP answer at all). Errors about the message or the
// caller (a too large text, a stale pop receipt, a context the caller
// ended, a deadline the account's limiter would pass, a request the
// service calls bad) are not the shard's fault.
func fault(ctx context.Context, err error) (shard, account bool) {
	if err == nil || ctx.Err() != nil {
		return false, false
	}
	if errors.Is(err, errNoAnswer) {
		// Not even an answer within the try timeout: the endpoint, as
		// for a refused connection.
		return true, true
	}
	for _, notShard := range []error{ErrMessageTooLarge, ErrInvalidText, ErrInvalidConfig, ErrOwnershipLost, errNoTurnBeforeDeadline} {
		if errors.Is(err, notShard) {
			return false, false
		}
	}
	var se *StorageError
	if errors.As(err, &se) {
		switch se.StatusCode {
		case 0:
			return true, true
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			// The request was wrong (a delay not shorter than the TTL,
			// say): every shard would answer the same.
			return false, false
		}
	}
	// 503 ServerBusy, 500 OperationTimedOut, a queue that is gone and cannot
	// be made again, a revoked credential: all of them are this shard's.
	return true, false
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
