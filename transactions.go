package azdispatch

import (
	"context"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch/internal/txcount"
)

// Op names a kind of storage request, one way everywhere: the request a
// [StorageError] reports, the request a [StorageMiddleware] wraps
// ([StorageOp.Kind]), and the call a memqueue fault hook fails. Its value
// is the request's name in errors, logs and spans.
type Op string

// The requests for messages, which a [StorageMiddleware] sees and a
// memqueue fault hook may fail.
const (
	OpReceive Op = "receive" // Get Messages
	OpDelete  Op = "delete"  // Delete Message
	// OpUpdate is Update Message: a renewal of a message's visibility, or
	// a release (hidden for a retry delay, or visible again at once).
	OpUpdate Op = "update"
	// OpSend is Put Message: a send, or a copy to the poison queue.
	OpSend  Op = "send"
	OpDepth Op = "depth" // Get Queue Properties, for the approximate depth
)

// The other requests a [StorageError] may name.
const (
	opCreate     Op = "create"      // Create Queue
	opBlobRead   Op = "blob read"   // Get Blob, Get Blob Properties
	opBlobWrite  Op = "blob write"  // Put Blob, Put Block, Set Blob Metadata, Create Container
	opBlobDelete Op = "blob delete" // Delete Blob
	opBlobLease  Op = "blob lease"  // Lease Blob
	opBlobList   Op = "blob list"   // List Blobs
	opPeek       Op = "peek"        // Peek Messages, counted in Other
	opOther      Op = "other"       // whatever else
)

// counted is where o is counted in a [Transactions].
func (o Op) counted() txcount.Op { return txcount.Named(string(o)) }

// Transactions counts billable storage requests by kind. Every HTTP attempt
// counts, retries included, because the service bills each one.
type Transactions struct {
	Receive      int64 // Get Messages requests, including those that found nothing
	EmptyReceive int64 // of Receive, the calls that returned no message
	Delete       int64 // Delete Message
	Update       int64 // Update Message: visibility renewals and releases
	Send         int64 // Put Message
	Depth        int64 // Get Queue Properties, for the approximate depth
	Create       int64 // Create Queue
	BlobRead     int64 // Get Blob and Get Blob Properties
	BlobWrite    int64 // Put Blob, Put Block, Set Blob Metadata, Create Container
	BlobDelete   int64 // Delete Blob
	BlobLease    int64 // Lease Blob: acquire, renew, release, break
	BlobList     int64 // List Blobs
	Other        int64 // anything else made through the account's clients
}

// Total is the number of billable requests. EmptyReceive is part of Receive
// and is not counted twice.
func (t Transactions) Total() int64 {
	return t.Receive + t.Delete + t.Update + t.Send + t.Depth + t.Create + t.Blob() + t.Other
}

// Blob is the number of blob service requests among them.
func (t Transactions) Blob() int64 {
	return t.BlobRead + t.BlobWrite + t.BlobDelete + t.BlobLease + t.BlobList
}

// counter accumulates [Transactions]: an account's, a queue's, a listener's,
// or one a context carries. It is safe for concurrent use; the zero value
// is ready.
type counter struct{ c txcount.Counter }

func (c *counter) add(o Op) { c.c.Add(o.counted()) }

// snapshot returns the counts so far.
func (c *counter) snapshot() Transactions {
	return Transactions{
		Receive:      c.c.Load(txcount.Receive),
		EmptyReceive: c.c.Empty(),
		Delete:       c.c.Load(txcount.Delete),
		Update:       c.c.Load(txcount.Update),
		Send:         c.c.Load(txcount.Send),
		Depth:        c.c.Load(txcount.Depth),
		Create:       c.c.Load(txcount.Create),
		BlobRead:     c.c.Load(txcount.BlobRead),
		BlobWrite:    c.c.Load(txcount.BlobWrite),
		BlobDelete:   c.c.Load(txcount.BlobDelete),
		BlobLease:    c.c.Load(txcount.BlobLease),
		BlobList:     c.c.Load(txcount.BlobList),
		Other:        c.c.Load(txcount.Other),
	}
}

// CountTransactions returns a copy of ctx in which every storage request
// this package makes is counted (besides the queue's and the account's own
// counts), and so is every call on a memqueue.Queue, and a function that
// returns the counts so far: what a piece of work cost. Contexts nest: an
// inner count does not hide an outer one.
func CountTransactions(ctx context.Context) (context.Context, func() Transactions) {
	c := new(counter)
	return countIn(ctx, c), c.snapshot
}

// countIn returns a copy of ctx whose requests c counts too.
func countIn(ctx context.Context, c *counter) context.Context { return txcount.With(ctx, &c.c) }

// requestTag says what a request is and which queue's counter it belongs to
// (nil for blob requests).
type requestTag struct {
	op    Op
	queue *counter
}

type requestTagKey struct{}

func tagRequest(ctx context.Context, o Op, queue *counter) context.Context {
	return context.WithValue(ctx, requestTagKey{}, requestTag{op: o, queue: queue})
}

// countingPolicy sits in the SDK pipeline's per-retry slot, so it sees every
// HTTP attempt, and counts it in the account's counter, the queue's counter
// and every counter attached to the request's context.
type countingPolicy struct{ account *counter }

func (p countingPolicy) Do(req *policy.Request) (*http.Response, error) {
	ctx := req.Raw().Context()
	o := opOther
	if tag, ok := ctx.Value(requestTagKey{}).(requestTag); ok {
		o = tag.op
		if tag.queue != nil {
			tag.queue.add(o)
		}
	}
	p.account.add(o)
	txcount.Add(ctx, o.counted())
	return req.Next()
}
