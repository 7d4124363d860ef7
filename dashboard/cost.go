package dashboard

import (
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// tally sums transaction counts: the dashboard's own requests, counted on
// the contexts of its readings and actions with
// [azdispatch.CountTransactions].
type tally struct {
	mu sync.Mutex
	t  azdispatch.Transactions
}

func (c *tally) add(t azdispatch.Transactions) {
	c.mu.Lock()
	c.t = plus(c.t, t)
	c.mu.Unlock()
}

func (c *tally) get() azdispatch.Transactions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// plus adds two counts, kind by kind.
func plus(a, b azdispatch.Transactions) azdispatch.Transactions {
	return azdispatch.Transactions{
		Receive: a.Receive + b.Receive, EmptyReceive: a.EmptyReceive + b.EmptyReceive,
		Delete: a.Delete + b.Delete, Update: a.Update + b.Update, Send: a.Send + b.Send,
		Depth: a.Depth + b.Depth, Create: a.Create + b.Create,
		BlobRead: a.BlobRead + b.BlobRead, BlobWrite: a.BlobWrite + b.BlobWrite,
		BlobDelete: a.BlobDelete + b.BlobDelete, BlobLease: a.BlobLease + b.BlobLease,
		BlobList: a.BlobList + b.BlobList, Other: a.Other + b.Other,
	}
}

// minus is a − b, kind by kind.
func minus(a, b azdispatch.Transactions) azdispatch.Transactions {
	neg := azdispatch.Transactions{
		Receive: -b.Receive, EmptyReceive: -b.EmptyReceive, Delete: -b.Delete, Update: -b.Update,
		Send: -b.Send, Depth: -b.Depth, Create: -b.Create, BlobRead: -b.BlobRead, BlobWrite: -b.BlobWrite,
		BlobDelete: -b.BlobDelete, BlobLease: -b.BlobLease, BlobList: -b.BlobList, Other: -b.Other,
	}
	return plus(a, neg)
}

// kinds names each kind of Transactions for the cost table, in the
// order the type lists them. EmptyReceive is a part of Receive, so it is
// shown but not added into the total.
var kinds = []struct {
	name, about string
	get         func(azdispatch.Transactions) int64
	part        bool
}{
	{"receive", "Get Messages", func(t azdispatch.Transactions) int64 { return t.Receive }, false},
	{"of which empty", "receives that found nothing", func(t azdispatch.Transactions) int64 { return t.EmptyReceive }, true},
	{"delete", "Delete Message", func(t azdispatch.Transactions) int64 { return t.Delete }, false},
	{"update", "Update Message: renewals, releases", func(t azdispatch.Transactions) int64 { return t.Update }, false},
	{"send", "Put Message", func(t azdispatch.Transactions) int64 { return t.Send }, false},
	{"depth", "Get Queue Properties", func(t azdispatch.Transactions) int64 { return t.Depth }, false},
	{"create", "Create Queue", func(t azdispatch.Transactions) int64 { return t.Create }, false},
	{"blob read", "Get Blob, Get Blob Properties", func(t azdispatch.Transactions) int64 { return t.BlobRead }, false},
	{"blob write", "Put Blob, Put Block, Set Blob Metadata", func(t azdispatch.Transactions) int64 { return t.BlobWrite }, false},
	{"blob delete", "Delete Blob", func(t azdispatch.Transactions) int64 { return t.BlobDelete }, false},
	{"blob lease", "Lease Blob", func(t azdispatch.Transactions) int64 { return t.BlobLease }, false},
	{"blob list", "List Blobs", func(t azdispatch.Transactions) int64 { return t.BlobList }, false},
	{"other", "peeks and anything else", func(t azdispatch.Transactions) int64 { return t.Other }, false},
}

// totals is everything counted now: every account's clients (the
// service's listeners and publishers on the same accounts included, and
// the dashboard's reads), and the queues with counts of their own.
func (h *Handler) totals() costSample {
	var all azdispatch.Transactions
	for _, a := range h.topo.accounts {
		all = plus(all, a.Transactions())
	}
	for _, c := range h.topo.counted {
		all = plus(all, c.Transactions())
	}
	return costSample{all: all, own: h.own.get()}
}

// costSample is the counts at one moment.
type costSample struct {
	at       time.Time
	all, own azdispatch.Transactions
}

// costHistory keeps the samples of the last hour, for rates per hour.
type costHistory struct {
	mu      sync.Mutex
	samples []costSample
}

func (c *costHistory) sample(now time.Time, s costSample) {
	s.at = now
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, s)
	// Keep one sample older than the window, as the rate's start.
	cut := 0
	for cut+1 < len(c.samples) && now.Sub(c.samples[cut+1].at) >= window {
		cut++
	}
	c.samples = c.samples[cut:]
}

// span returns the oldest sample within (or just past) the window and the
// newest.
func (c *costHistory) span() (first, last costSample, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) < 2 {
		return costSample{}, costSample{}, false
	}
	return c.samples[0], c.samples[len(c.samples)-1], true
}
