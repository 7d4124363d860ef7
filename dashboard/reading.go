package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// readTimeout bounds one reading, so that a storage account that does not
// answer cannot hold every viewer.
const readTimeout = 30 * time.Second

// readParallel bounds the requests one reading has in flight.
const readParallel = 8

// val is one figure read from storage, or why it could not be: shown as
// absent, never as zero.
type val struct {
	N   int64
	OK  bool
	Err string // why it is absent; "" when OK, or when not applicable
}

func got(n int64) val { return val{N: n, OK: true} }

func failed(err error) val { return val{Err: cleanError(err)} }

// unitReading is what one reading found for a queue or shard.
type unitReading struct {
	Depth, Poison, Age val // Age in nanoseconds
}

// overviewReading is one reading of every unit, shared by every viewer.
type overviewReading struct {
	Units map[string]unitReading
}

// readOverview reads every unit: its depth, its poison queue's depth and
// the age of its oldest message, three requests each, at most
// readParallel at once.
func (h *Handler) readOverview(ctx context.Context) overviewReading {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	ctx, count := azdispatch.CountTransactions(ctx)
	defer func() { h.own.add(count()) }()
	out := overviewReading{Units: make(map[string]unitReading, len(h.topo.units))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, readParallel)
	for _, u := range h.topo.units {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var r unitReading
			if d, err := u.queue.Depth(ctx); err != nil {
				r.Depth = failed(err)
			} else {
				r.Depth = got(int64(d))
			}
			switch {
			case u.poison == nil:
				r.Poison = val{Err: "no poison queue"}
			default:
				if d, err := u.poison.Depth(ctx); err != nil {
					r.Poison = failed(err)
				} else {
					r.Poison = got(int64(d))
				}
			}
			if _, ok := u.queue.(peeker); !ok {
				r.Age = val{Err: "the queue cannot be peeked"}
			} else if a, err := azdispatch.OldestAge(ctx, u.queue); err != nil {
				r.Age = failed(err)
			} else {
				r.Age = got(int64(a))
			}
			mu.Lock()
			out.Units[u.name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	h.record(out)
	return out
}

// record adds a reading to the sparklines' history, and a sample of the
// transaction counts (which cost nothing to read) to the cost page's.
func (h *Handler) record(r overviewReading) {
	now := h.opts.Now()
	add := func(key string, v val) { h.hist.add(key, sample{at: now, v: float64(v.N), ok: v.OK}) }
	for _, s := range h.topo.sets {
		agg := aggregate(r, s.units)
		add("set-depth:"+s.name, agg.Depth)
		add("set-poison:"+s.name, agg.Poison)
		add("set-age:"+s.name, agg.Age)
	}
	for _, u := range h.topo.units {
		ur := r.Units[u.name]
		add("depth:"+u.name, ur.Depth)
		add("poison:"+u.name, ur.Poison)
		add("age:"+u.name, ur.Age)
	}
	for _, a := range h.topo.accounts {
		var us []*unit
		for _, u := range h.topo.units {
			if u.account == a {
				us = append(us, u)
			}
		}
		agg := aggregate(r, us)
		add("account-depth:"+a.Name(), agg.Depth)
		add("account-poison:"+a.Name(), agg.Poison)
		add("account-age:"+a.Name(), agg.Age)
	}
	h.costs.sample(now, h.totals())
}

// aggregate sums depths and takes the oldest age over units: absent if
// any unit's is, since a sum that skipped a queue would read low.
func aggregate(r overviewReading, units []*unit) unitReading {
	out := unitReading{Depth: got(0), Poison: got(0), Age: got(0)}
	for _, u := range units {
		ur := r.Units[u.name]
		out.Depth = sum(out.Depth, ur.Depth, u.name)
		if ur.Poison.Err != "no poison queue" {
			out.Poison = sum(out.Poison, ur.Poison, u.name)
		}
		out.Age = oldest(out.Age, ur.Age, u.name)
	}
	return out
}

func sum(a, b val, name string) val {
	switch {
	case !a.OK:
		return a
	case !b.OK:
		return val{Err: fmt.Sprintf("%s: %s", name, orUnknown(b.Err))}
	}
	return got(a.N + b.N)
}

func oldest(a, b val, name string) val {
	switch {
	case !a.OK:
		return a
	case !b.OK:
		return val{Err: fmt.Sprintf("%s: %s", name, orUnknown(b.Err))}
	}
	return got(max(a.N, b.N))
}

func orUnknown(s string) string {
	if s == "" {
		return "not read"
	}
	return s
}
