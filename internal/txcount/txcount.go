// Package txcount counts billable storage requests by kind, in counters a
// context carries: the root package's Account and Queue count each HTTP
// attempt through their SDK pipeline, memqueue counts each call, and both
// add them to every counter attached to the request's context (a
// listener's, or one of azdispatch.CountTransactions).
package txcount

import (
	"context"
	"sync/atomic"
)

// Op is the kind of a storage request.
type Op int

// The kinds of request counted.
const (
	Other Op = iota
	Receive
	Delete
	Update
	Send
	Depth
	Create
	BlobRead
	BlobWrite
	BlobDelete
	BlobLease
	BlobList
	NumOps
)

// Named is the counter of the request named name, as azdispatch.Op names
// it; Other for a name it does not know.
func Named(name string) Op {
	switch name {
	case "receive":
		return Receive
	case "delete":
		return Delete
	case "update":
		return Update
	case "send":
		return Send
	case "depth":
		return Depth
	case "create":
		return Create
	case "blob read":
		return BlobRead
	case "blob write":
		return BlobWrite
	case "blob delete":
		return BlobDelete
	case "blob lease":
		return BlobLease
	case "blob list":
		return BlobList
	}
	return Other
}

// Counter counts requests by kind, and the receives that found nothing.
// The zero value is ready; it is safe for concurrent use.
type Counter struct {
	ops   [NumOps]atomic.Int64
	empty atomic.Int64
}

// Add counts one request of kind o.
func (c *Counter) Add(o Op) { c.ops[o].Add(1) }

// AddEmpty counts a receive that found nothing (it is counted as a receive
// too, by Add).
func (c *Counter) AddEmpty() { c.empty.Add(1) }

// Load returns the requests of kind o counted so far.
func (c *Counter) Load(o Op) int64 { return c.ops[o].Load() }

// Empty returns the empty receives counted so far.
func (c *Counter) Empty() int64 { return c.empty.Load() }

// chain is the list of counters a context's requests are counted in.
type chain struct {
	c    *Counter
	next *chain
}

type key struct{}

// With returns a copy of ctx whose requests are also counted in c.
// Contexts nest: an inner counter does not hide an outer one.
func With(ctx context.Context, c *Counter) context.Context {
	outer, _ := ctx.Value(key{}).(*chain)
	return context.WithValue(ctx, key{}, &chain{c: c, next: outer})
}

// Add counts one request of kind o in every counter ctx carries.
func Add(ctx context.Context, o Op) {
	for ch, _ := ctx.Value(key{}).(*chain); ch != nil; ch = ch.next {
		ch.c.Add(o)
	}
}

// AddEmpty counts an empty receive in every counter ctx carries.
func AddEmpty(ctx context.Context) {
	for ch, _ := ctx.Value(key{}).(*chain); ch != nil; ch = ch.next {
		ch.c.AddEmpty()
	}
}
