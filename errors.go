package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/redact"
	"github.com/azdispatch/azdispatch/internal/sasperm"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Sentinel errors. Test for them with [errors.Is]; the errors this package
// returns wrap them together with the details.
var (
	// ErrInvalidConfig is wrapped by every [*ConfigError].
	ErrInvalidConfig = errors.New("azdispatch: invalid configuration")

	// ErrOwnershipLost means this process no longer owns what it worked on.
	//
	// For a message: its pop receipt was stale, because the message
	// became visible again (or was deleted). The message is not lost;
	// whoever received it last owns it now. Azurite answers 400
	// PopReceiptMismatch, the service 404 MessageNotFound.
	//
	// For a [Lease]: the lease could not be kept (another holder has it,
	// or renewals failed for so long that it may have expired). It is then
	// the cause of the context of the function [Lease.Run] runs, and is
	// wrapped by Run's error.
	ErrOwnershipLost = errors.New("azdispatch: ownership lost")

	// ErrMessageTooLarge is matched by every error of something too large:
	// a [*MessageTooLargeError] (a text over what a queue message takes,
	// with no payload store to offload it to), and a payload over its
	// [PayloadLimits], which a publisher refuses before any request and a
	// listener poisons. Each says which limit, and which option sets it.
	ErrMessageTooLarge = payload.ErrTooLarge

	// ErrInvalidText means a message text holds something the XML the
	// service speaks cannot carry (invalid UTF-8 or a forbidden control
	// character). Go's XML encoder would silently replace it, corrupting the
	// message, so it is refused before sending; use a base64 codec for
	// binary payloads.
	ErrInvalidText = xmltext.ErrInvalid

	// ErrHandlerTimeout is the cause of a handler's context when it ran longer
	// than [ListenerOptions.HandlerTimeout].
	ErrHandlerTimeout = errors.New("azdispatch: handler timed out")

	// ErrDrainTimeout is the cause of a handler's context when the listener
	// is shutting down and the drain timeout has passed.
	ErrDrainTimeout = errors.New("azdispatch: listener drain timeout")

	// ErrAlreadyRunning is returned by [Listener.Run] when the listener is
	// already running.
	ErrAlreadyRunning = errors.New("azdispatch: listener is already running")

	// ErrNotPoison is returned when a poison-queue message does not hold a
	// poison envelope written by this package.
	ErrNotPoison = wire.ErrNotEnvelope

	// ErrNoBlobService is matched by the error of a feature that needs a
	// blob service and has none: an account whose blob service URL is not
	// known (set [AccountOptions.BlobServiceURL]) for payloads and leases; a
	// publisher or listener whose target or source has no [PayloadStore] (see
	// [PayloadStorer]) and whose options name none. The error says which.
	ErrNoBlobService = errors.New("azdispatch: no blob service")

	// ErrAlreadyCancelled is matched by the error of [Publisher.Cancel] for a
	// message cancelled before.
	ErrAlreadyCancelled = errors.New("azdispatch: message already cancelled")

	// ErrAlreadyDelivered is matched by the error of [Publisher.Cancel] for a
	// message a listener has received to handle (or that is gone: deleted,
	// expired or cleared by someone else): too late to cancel.
	ErrAlreadyDelivered = errors.New("azdispatch: message already delivered")

	// ErrCancelUndetermined is matched by the error of [Publisher.Cancel]
	// when it cannot tell whether the message was delivered (the error
	// says why): a message that never expires, may have been hidden again
	// by listeners (see [Publisher.SendAfter]), and was due longer ago than
	// the record of its delivery is kept (30 days), so that a delivery may
	// have left no trace; or a delete whose answer was lost, and whose retry
	// found the message gone, deleted by it or received by a listener. The
	// cancel is recorded, and a second cancel says the same; a message due
	// beyond 7 days that has not been delivered yet never will be.
	ErrCancelUndetermined = errors.New("azdispatch: cannot tell whether the message was delivered")

	// ErrDuplicate is matched by the error of a send with a
	// [SendOptions.UniqueKey] that a send within its window used already.
	ErrDuplicate = errors.New("azdispatch: a send with this unique key was made within its window")

	// ErrInvalidPointer means a message claims to point at an offloaded
	// payload but the pointer is malformed or outside the listener's limits.
	// Such a message is poisoned without any blob request.
	ErrInvalidPointer = wire.ErrInvalidPointer

	// ErrPayloadMissing means the blob a pointer names does not exist. The
	// message is poisoned, never deleted: its pointer is all that is left.
	ErrPayloadMissing = errors.New("azdispatch: payload blob not found")

	// ErrPayloadCorrupt means a payload blob does not match its pointer (size
	// or SHA-256) or cannot be read as a payload. The message is poisoned
	// and the blob kept for inspection.
	ErrPayloadCorrupt = payload.ErrCorrupt

	// ErrPayloadTooLarge is [ErrMessageTooLarge], the one sentinel of
	// "too large", under its earlier name.
	//
	// Deprecated: use ErrMessageTooLarge, which every error of a size over
	// a limit matches.
	ErrPayloadTooLarge = ErrMessageTooLarge

	// ErrNoHealthyShard is returned by a [ShardedQueue]'s Send, Receive and
	// Depth when no shard could serve the request: every shard was backed
	// off after failures, or failed this time. The shards' own errors are
	// joined to it. A keyed send returns it when its key's shard is backed
	// off: keyed sends do not move to another shard, so that every message
	// of a key stays on one shard; retry later.
	ErrNoHealthyShard = errors.New("azdispatch: no healthy shard")

	// ErrFatal is matched by storage errors that retrying will not fix: a
	// refused credential, a queue that is gone or disabled (see
	// [StorageError.Fatal]). A listener that meets one keeps trying, with a
	// back-off, but reports it: an [EventFatal], [State.Fatal], [Listener.Ready], and, if
	// [ListenerOptions.FatalTimeout] is set, [Listener.Run]'s error.
	ErrFatal = errors.New("azdispatch: fatal storage error")

	// ErrHandlersAbandoned is returned by [Listener.Run] when handlers still ran 10 s
	// after the drain timeout had cancelled their contexts, or deletes of
	// handled messages were still being retried: Run returned without
	// them, and the error names their messages. Each settles its message
	// if it ever returns.
	ErrHandlersAbandoned = errors.New("azdispatch: handlers or deletes outlasted the drain and were abandoned")

	// ErrNotReady is wrapped by the error of [Listener.Ready] and
	// [Scheduler.Ready], together with the cause.
	ErrNotReady = errors.New("azdispatch: not ready")

	// ErrScheduleNotFound is what pausing, resuming or running now a
	// schedule returns when its store holds no state for it: no
	// [Scheduler] has started it (or its name or queue is not the one
	// given).
	ErrScheduleNotFound = errors.New("azdispatch: schedule not found")

	// ErrScheduleEnded is what running now a schedule returns once its
	// timetable has no more occurrences.
	ErrScheduleEnded = errors.New("azdispatch: schedule has ended")
)

// prefix begins every error text of this package, once.
const prefix = "azdispatch: "

// wrapped is an error of this package around another: what was being
// done, then the error, whose own "azdispatch: " is left out, so that a
// text names the package once however deep its chain ("azdispatch: cancel
// m1: message already cancelled", not "… m1: azdispatch: message …").
type wrapped struct {
	doing string
	err   error
}

// wrapf wraps err with what was being done (a format and its arguments).
func wrapf(err error, format string, args ...any) error {
	return &wrapped{doing: fmt.Sprintf(format, args...), err: err}
}

func (w *wrapped) Error() string {
	return prefix + w.doing + ": " + strings.TrimPrefix(w.err.Error(), prefix)
}

func (w *wrapped) Unwrap() error { return w.err }

// bare is err whose text leaves out its own "azdispatch: ", for an error of
// this package that quotes it in the middle of its own text.
type bare struct{ err error }

func (b bare) Error() string { return strings.TrimPrefix(b.err.Error(), prefix) }

func (b bare) Unwrap() error { return b.err }

// joined is errors.Join whose text leaves out each error's own
// "azdispatch: ", for the list inside an error of this package.
type joined []error

// joinErrs joins errs as errors.Join does (nil for none).
func joinErrs(errs ...error) error {
	var j joined
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	if len(j) == 0 {
		return nil
	}
	return j
}

func (j joined) Error() string {
	parts := make([]string, len(j))
	for i, err := range j {
		parts[i] = strings.TrimPrefix(err.Error(), prefix)
	}
	return strings.Join(parts, "; ")
}

func (j joined) Unwrap() []error { return j }

// errNotStarted is the result of a handler call that never started because
// the listener began to shut down while the message waited for a handler.
var errNotStarted = errors.New("azdispatch: not started before shutdown")

// ConfigError reports an invalid configuration value, naming the field or
// argument as the caller wrote it.
type ConfigError struct {
	Field  string // e.g. "ListenerOptions.Scaling.BatchSize", or an argument such as "handler"
	Reason string
}

// Error names the field and what is wrong with it.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("azdispatch: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// MessageTooLargeError reports a message text longer than a queue message
// may be. Size and Limit count UTF-8 bytes of the text as sent.
type MessageTooLargeError struct {
	Size  int
	Limit int
}

// Error gives the size and the limit.
func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("azdispatch: message is %d bytes, over the %d-byte limit", e.Size, e.Limit)
}

// Is reports whether target is [ErrMessageTooLarge].
func (e *MessageTooLargeError) Is(target error) bool { return target == ErrMessageTooLarge }

// PermanentError marks a handler failure that retrying cannot fix: the
// listener moves the message to the poison queue at once.
type PermanentError struct{ Err error }

// Permanent wraps err so that the listener poisons the message instead of
// retrying it. Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error is the wrapped error's message, marked permanent.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// SnoozeError is what [Snooze] returns: the message is put back for For,
// without counting a try.
type SnoozeError struct{ For time.Duration }

// Snooze is a handler's "not yet": return Snooze(d) to put the message back
// for d (at most [MaxVisibility], rounded up to a second by the service)
// without counting a try: one Update Message, which hides it again with a
// line that says how many deliveries so far were not tries, as a delayed
// message's hop does. A message snoozed again and again is never poisoned
// for it; use an error for "failed". A message whose text has no room for
// the line (within 64 bytes of [MaxMessageSize]) is released for d as a
// failure would be, and that delivery counts. In a batch item's handler it
// leaves the item undone: its batch is tried again after the retry delay.
func Snooze(d time.Duration) error { return &SnoozeError{For: min(max(d, 0), MaxVisibility)} }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %v", e.For) }

// PanicError is the failure recorded when a handler panics.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the goroutine's stack at the panic
}

// Error gives the panic value (the stack is in Stack).
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// catchPanic, deferred by a call of user code, turns its panic into a
// [*PanicError] in *err.
func catchPanic(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// decodeFailed is the poison reason of a message text the codec could not
// turn into the listener's type: such messages are poisoned without
// reaching the handler.
func decodeFailed(err error) string { return "decode: " + err.Error() }

// StorageError reports a failed storage request. Its message names the
// operation, the queue and the service's status and error code, and never a
// credential: transport errors have their URL's query (which holds a SAS
// signature) removed before they are kept. The [*azcore.ResponseError] of a
// failed response stays reachable with [errors.As].
type StorageError struct {
	Op         Op // the request that failed
	Queue      string
	Blob       string // for a blob request, "<container>/<blob>"; Queue is then empty
	StatusCode int    // HTTP status; 0 when no response arrived
	Code       string // service error code, e.g. "ServerBusy"; empty when none
	// RetryAfter is the service's hint of when to try again (Retry-After
	// on a 503 or 500), at most 5 minutes; zero when it gave none.
	RetryAfter time.Duration
	Err        error
}

// Error names the operation, the queue and the status and error code (or
// the redacted transport error); a 403 for want of a permission also says what the operation needs.
func (e *StorageError) Error() string {
	on := fmt.Sprintf("queue %q", e.Queue)
	if e.Blob != "" {
		on = fmt.Sprintf("blob %q", e.Blob)
	}
	if e.StatusCode != 0 {
		code := e.Code
		if code == "" {
			code = http.StatusText(e.StatusCode)
		}
		return fmt.Sprintf("azdispatch: %s on %s: %d %s%s", e.Op, on, e.StatusCode, code, e.permissionHint())
	}
	return fmt.Sprintf("azdispatch: %s on %s: %v", e.Op, on, e.Err)
}

// Unwrap returns the cause.
func (e *StorageError) Unwrap() error { return e.Err }

// permissionHint says, for a request refused for want of a permission,
// what the operation needs (see [sasperm.Hint]); "" for any other error.
func (e *StorageError) permissionHint() string {
	var resp *http.Response
	var message string
	var re *azcore.ResponseError
	if errors.As(e.Err, &re) && re.RawResponse != nil {
		resp, message = re.RawResponse, re.Error()
	}
	return sasperm.Explain(string(e.Op), e.StatusCode, e.Code, message, resp)
}

// Is reports [ErrOwnershipLost] for a stale pop receipt on a delete or
// update, and [ErrFatal] for an error that retrying will not fix (see
// [StorageError.Fatal]).
func (e *StorageError) Is(target error) bool {
	switch target {
	case ErrOwnershipLost:
		return answer{e.StatusCode, e.Code}.receiptStale(e.Op)
	case ErrFatal:
		return e.Fatal()
	}
	return false
}

// blobError wraps err from a request for blob ("<container>/<blob>", or
// the container alone), or returns nil for nil.
func blobError(o Op, blob string, err error) error {
	if err == nil {
		return nil
	}
	se := storageError(o, "", err).(*StorageError)
	se.Blob = blob
	return se
}

// storageError wraps err from a storage call, or returns nil for nil.
func storageError(o Op, queue string, err error) error {
	if err == nil {
		return nil
	}
	se := &StorageError{Op: o, Queue: queue, Err: redact.URLError(err)}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		se.StatusCode = re.StatusCode
		se.Code = re.ErrorCode
		se.RetryAfter = retryAfter(re)
	}
	return se
}

// checkText refuses a message text the service would refuse (longer than
// limit UTF-8 bytes) or that XML cannot carry: the SDK sends messages inside
// an XML document, and Go's XML encoder silently replaces invalid UTF-8 and
// the control characters XML 1.0 forbids with U+FFFD.
func checkText(text string, limit int) error {
	if len(text) > limit {
		return &MessageTooLargeError{Size: len(text), Limit: limit}
	}
	return xmltext.Check(text)
}

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
