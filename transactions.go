package azdispatch

import (
	"context"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch/internal/txcount"
)

// op is the kind of a storage request, for counting and for errors.
type op = txcount.Op

const (
	opOther      = txcount.Other
	opReceive    = txcount.Receive
	opDelete     = txcount.Delete
	opUpdate     = txcount.Update
	opSend       = txcount.Send
	opDepth      = txcount.Depth
	opCreate     = txcount.Create
	opBlobRead   = txcount.BlobRead
	opBlobWrite  = txcount.BlobWrite
	opBlobDelete = txcount.BlobDelete
	opBlobLease  = txcount.BlobLease
	opBlobList   = txcount.BlobList
)

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

// Counter accumulates Transactions. It is safe for concurrent use; the zero
// value is ready. Attach one to a context with CountTransactions to learn what
// a piece of work cost.
type Counter struct{ c txcount.Counter }

func (c *Counter) add(o op) { c.c.Add(o) }

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Transactions {
	return Transactions{
		Receive:      c.c.Load(opReceive),
		EmptyReceive: c.c.Empty(),
		Delete:       c.c.Load(opDelete),
		Update:       c.c.Load(opUpdate),
		Send:         c.c.Load(opSend),
		Depth:        c.c.Load(opDepth),
		Create:       c.c.Load(opCreate),
		BlobRead:     c.c.Load(opBlobRead),
		BlobWrite:    c.c.Load(opBlobWrite),
		BlobDelete:   c.c.Load(opBlobDelete),
		BlobLease:    c.c.Load(opBlobLease),
		BlobList:     c.c.Load(opBlobList),
		Other:        c.c.Load(opOther),
	}
}

// CountTransactions returns a copy of ctx in which every storage request this
// package makes is also counted in c (besides the queue's and the account's
// own counters), and so is every call on a memqueue.Queue. Contexts nest: an
// inner counter does not hide an outer one.
func CountTransactions(ctx context.Context, c *Counter) context.Context {
	return txcount.With(ctx, &c.c)
}

// requestTag says what a request is and which queue's counter it belongs to
// (nil for blob requests).
type requestTag struct {
	op    op
	queue *Counter
}

type requestTagKey struct{}

func tagRequest(ctx context.Context, o op, queue *Counter) context.Context {
	return context.WithValue(ctx, requestTagKey{}, requestTag{op: o, queue: queue})
}

// countingPolicy sits in the SDK pipeline's per-retry slot, so it sees every
// HTTP attempt, and counts it in the account's counter, the queue's counter
// and every counter attached to the request's context.
type countingPolicy struct{ account *Counter }

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
	txcount.Add(ctx, o)
	return req.Next()
}
