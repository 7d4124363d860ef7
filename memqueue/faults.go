package memqueue

import (
	"context"
	"fmt"
	"net/http"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/txcount"
)

// faults are the failures armed by FailNext and LoseNext, counted down per
// call. They are guarded by the queue's mutex.
type faults struct {
	fail map[azdispatch.Op][]error // one entry per call to fail, in order
	lose map[azdispatch.Op]int
}

// FailNext makes the next n calls of op fail before they act: calls on the
// queue, or, for the blob ops (OpBlobRead, OpBlobWrite, OpBlobDelete,
// OpBlobList, OpBlobLease), requests on its payload store. They return
// err, or, if err is nil, the service's answer to a request over its
// scalability target: a 503 ServerBusy *[azdispatch.StorageError].
func (q *Queue) FailNext(op azdispatch.Op, n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.faults.fail == nil {
		q.faults.fail = map[azdispatch.Op][]error{}
	}
	for range n {
		q.faults.fail[op] = append(q.faults.fail[op], err)
	}
}

// LoseNext makes the next n calls of op act, then report a timeout, as when
// the response is lost on its way back: a lost send leaves its message on
// the queue (a retry sends a second copy), a lost receive leaves its
// messages hidden for the visibility timeout with their DequeueCount raised,
// a lost delete has deleted the message, a lost blob write has written the
// blob (a unique key's record, say).
func (q *Queue) LoseNext(op azdispatch.Op, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.faults.lose == nil {
		q.faults.lose = map[azdispatch.Op]int{}
	}
	q.faults.lose[op] += n
}

// before counts a call of op as a request made, then runs the interceptor
// and an armed failure. It returns the error the call fails with, if any.
// A request refused or lost is still a request: an azdispatch.Queue counts
// every attempt, and the service bills a throttled one.
func (q *Queue) before(ctx context.Context, op azdispatch.Op) error {
	q.calls[opIndex(op)].Add(1)
	txcount.Add(ctx, txcount.Named(string(op)))
	if q.intercept != nil {
		if err := q.intercept(ctx, q.name, op); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return q.storageError(op, 0, "", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	pending := q.faults.fail[op]
	if len(pending) == 0 {
		return nil
	}
	err := pending[0]
	q.faults.fail[op] = pending[1:]
	if err == nil {
		err = q.storageError(op, http.StatusServiceUnavailable, "ServerBusy",
			fmt.Errorf("memqueue: injected failure of %s", op))
	}
	return err
}

// The kinds of request on a queue's payload store, which its fault hooks
// may fail or lose (see [Queue.PayloadStore]).
const (
	OpBlobRead   azdispatch.Op = "blob read"   // a read of a blob or its properties
	OpBlobWrite  azdispatch.Op = "blob write"  // a write of a blob or its metadata
	OpBlobDelete azdispatch.Op = "blob delete" // a delete of a blob
	OpBlobList   azdispatch.Op = "blob list"   // a page of a listing
	OpBlobLease  azdispatch.Op = "blob lease"  // an acquire, renewal or release of a blob's lease
)

// numBlobOps is the number of kinds of request on a payload store.
const numBlobOps = 5

func blobIndex(op azdispatch.Op) int {
	switch op {
	case OpBlobRead:
		return 0
	case OpBlobWrite:
		return 1
	case OpBlobDelete:
		return 2
	case OpBlobLease:
		return 4
	}
	return 3
}

// blobRequest is the fault hook of the queue's payload store: it counts a
// request of op, then runs the interceptor and an armed failure or loss,
// as before does for the queue's own calls.
func (q *Queue) blobRequest(ctx context.Context, op azdispatch.Op, blob string) (fail error, lose bool) {
	q.blobCalls[blobIndex(op)].Add(1)
	if q.intercept != nil {
		if err := q.intercept(ctx, q.name, op); err != nil {
			return err, false
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if pending := q.faults.fail[op]; len(pending) > 0 {
		err := pending[0]
		q.faults.fail[op] = pending[1:]
		if err == nil {
			err = &azdispatch.StorageError{Op: op, Queue: q.name, Blob: blob, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy",
				Err: fmt.Errorf("memqueue: injected failure of %s", op)}
		}
		return err, false
	}
	return nil, q.lost(op)
}

// lost reports whether the response to a call of op that has acted is to be
// lost, counting one down. The caller holds q.mu.
func (q *Queue) lost(op azdispatch.Op) bool {
	if q.faults.lose[op] == 0 {
		return false
	}
	q.faults.lose[op]--
	return true
}

// lostError is what a call whose response was lost returns.
func (q *Queue) lostError(op azdispatch.Op) error {
	return q.storageError(op, 0, "", fmt.Errorf("memqueue: response to %s lost: %w", op, context.DeadlineExceeded))
}

// storageError is the error a call of op fails with, shaped as the error an
// azdispatch.Queue returns for the same answer from the service.
func (q *Queue) storageError(op azdispatch.Op, status int, code string, err error) error {
	return &azdispatch.StorageError{Op: op, Queue: q.name, StatusCode: status, Code: code, Err: err}
}
