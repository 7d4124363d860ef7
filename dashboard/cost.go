package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/txcount"
)

// tally counts the dashboard's own requests, live: its counter is
// attached (see attach) to the context of every HTTP request the dashboard
// serves and of every job it runs, so that a reading's requests, a test
// send's, a job's, are counted as they are made, by the same call that
// counts them in their account's (or memqueue's) counter, and just after
// it. So a sample that reads this count first and the accounts' second
// never finds the dashboard ahead of everything (see [Handler.totals]).
type tally struct{ c txcount.Counter }

// attach returns a copy of ctx whose requests the tally counts.
func (t *tally) attach(ctx context.Context) context.Context { return txcount.With(ctx, &t.c) }

// get returns the counts so far.
func (t *tally) get() azdispatch.Transactions {
	c := &t.c
	return azdispatch.Transactions{
		Receive: c.Load(txcount.Receive), EmptyReceive: c.Empty(), Delete: c.Load(txcount.Delete),
		Update: c.Load(txcount.Update), Send: c.Load(txcount.Send), Depth: c.Load(txcount.Depth),
		Create: c.Load(txcount.Create), BlobRead: c.Load(txcount.BlobRead), BlobWrite: c.Load(txcount.BlobWrite),
		BlobDelete: c.Load(txcount.BlobDelete), BlobLease: c.Load(txcount.BlobLease),
		BlobList: c.Load(txcount.BlobList), Other: c.Load(txcount.Other),
	}
}

// combine applies f to a and b, kind by kind.
func combine(a, b azdispatch.Transactions, f func(x, y int64) int64) azdispatch.Transactions {
	return azdispatch.Transactions{
		Receive: f(a.Receive, b.Receive), EmptyReceive: f(a.EmptyReceive, b.EmptyReceive),
		Delete: f(a.Delete, b.Delete), Update: f(a.Update, b.Update), Send: f(a.Send, b.Send),
		Depth: f(a.Depth, b.Depth), Create: f(a.Create, b.Create),
		BlobRead: f(a.BlobRead, b.BlobRead), BlobWrite: f(a.BlobWrite, b.BlobWrite),
		BlobDelete: f(a.BlobDelete, b.BlobDelete), BlobLease: f(a.BlobLease, b.BlobLease),
		BlobList: f(a.BlobList, b.BlobList), Other: f(a.Other, b.Other),
	}
}

// plus adds two counts, kind by kind.
func plus(a, b azdispatch.Transactions) azdispatch.Transactions {
	return combine(a, b, func(x, y int64) int64 { return x + y })
}

// minus is a − b, kind by kind.
func minus(a, b azdispatch.Transactions) azdispatch.Transactions {
	return combine(a, b, func(x, y int64) int64 { return x - y })
}

// shares are a window's counts, from its first sample to its last: the
// dashboard's own, and all, made of the dashboard's and the rest of the
// process's, so that all is never less than the dashboard's, kind by kind
// and in total. The rest is what the accounts counted beyond the
// dashboard's, and never less than none: the dashboard's can exceed what
// its accounts counted only when one of its requests was on its way at
// the first sample (counted in its account, not yet in the tally), or
// went to an account the dashboard does not show (a payload store on
// another account); those requests are then in all as the dashboard's.
func shares(first, last costSample) (own, all azdispatch.Transactions) {
	own = minus(last.own, first.own)
	rest := combine(minus(last.all, first.all), own, func(x, y int64) int64 { return max(x-y, 0) })
	return own, plus(own, rest)
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
//
// The dashboard's own count is read first: each request is counted in its
// account before it is in the dashboard's tally, so what the tally holds
// then, its account holds too.
func (h *Handler) totals() costSample {
	own := h.own.get()
	var all azdispatch.Transactions
	for _, a := range h.topo.accounts {
		all = plus(all, a.Transactions())
	}
	for _, c := range h.topo.counted {
		all = plus(all, c())
	}
	return costSample{all: all, own: own}
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

// sample adds the counts read now. It reads them under the history's
// lock, and takes for their time no earlier one than the last sample's:
// requests that sample at once append in the order they read, so that a
// later sample never holds less than an earlier one (a count read first
// and appended last had made the dashboard's share of a window negative).
func (c *costHistory) sample(now time.Time, read func() costSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.samples); n > 0 && now.Before(c.samples[n-1].at) {
		now = c.samples[n-1].at
	}
	s := read()
	s.at = now
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
