package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// readTimeout bounds one reading of a page that lists (poison messages,
// payloads, schedules), so that a storage account that does not answer
// cannot hold every viewer: the page says so within seconds, as a
// listener notices within one. It is the overview's bound: a healthy
// account answers in milliseconds, and a page's reading is a few requests.
const readTimeout = overviewTimeout

// overviewTimeout bounds one reading of the overview, every queue's
// requests at once: a queue whose account does not answer by then is shown
// unread, with why, rather than hold the page. A healthy account answers
// in milliseconds.
const overviewTimeout = 5 * time.Second

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

// errNoAnswerInTime is the cause of a reading's context that ran out.
var errNoAnswerInTime = fmt.Errorf("no answer within %v", overviewTimeout)

// withReadDeadline bounds a page's reading by readTimeout, with
// errNoAnswerInTime as the cause, so that readError can tell a reading
// cut off by it from one storage refused.
func withReadDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, readTimeout, errNoAnswerInTime)
}

// readError is why a reading under withReadDeadline failed, as a page
// shows it: "no answer within 5 s" when its deadline cut it off (rather
// than whatever the SDK made of a cancelled context); "" for nil.
func readError(ctx context.Context, err error) string {
	if err != nil && context.Cause(ctx) == errNoAnswerInTime {
		return "no answer within " + fmtDuration(readTimeout)
	}
	return cleanError(err)
}

// readVal reads one figure; a request cut off by the reading's deadline
// says so, as that, not as whatever the SDK made of its cancelled context.
func readVal(ctx context.Context, read func(context.Context) (int, error)) val {
	n, err := read(ctx)
	switch {
	case err == nil:
		return got(int64(n))
	case context.Cause(ctx) == errNoAnswerInTime:
		return val{Err: "no answer within " + fmtDuration(overviewTimeout)}
	}
	return failed(err)
}

// unitReading is what one reading found for a queue or shard.
type unitReading struct {
	Depth, Poison, Age val // Age in nanoseconds
	Pause              pauseVal
}

// overviewReading is one reading of every unit, shared by every viewer.
type overviewReading struct {
	Units map[string]unitReading
}

// readOverview reads every unit: its depth (and its pause with it), its
// poison queue's depth and the age of its oldest message, three requests
// each (a fourth for the pause of a queue whose depth does not bring it:
// see readDepthAndPause), in parallel, with at most readParallel units at
// once, all within overviewTimeout.
func (h *Handler) readOverview(ctx context.Context) overviewReading {
	ctx, cancel := context.WithTimeoutCause(ctx, overviewTimeout, errNoAnswerInTime)
	defer cancel()
	out := overviewReading{Units: make(map[string]unitReading, len(h.topo.units))}
	// A shard its sharded queue has backed off (it failed, or did not
	// answer) is not read: it would only hold the page for the reading's
	// deadline, and its health row says why.
	backedOff := map[string]bool{}
	for _, s := range h.topo.sets {
		if s.sharded == nil {
			continue
		}
		for _, sh := range s.sharded.Health() {
			backedOff[sh.Shard] = !sh.Healthy && !sh.RetryAt.IsZero()
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, readParallel)
	for _, u := range h.topo.units {
		if backedOff[u.name] {
			skipped := val{Err: "not read: the sharded queue has backed this shard off (see its health)"}
			mu.Lock() // the units read before it are being written
			out.Units[u.name] = unitReading{Depth: skipped, Poison: skipped, Age: skipped,
				Pause: pauseVal{Pausable: u.caps.Pauser != nil, Err: skipped.Err}}
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var r unitReading
			var each sync.WaitGroup
			each.Go(func() { r.Depth, r.Pause = readDepthAndPause(ctx, u) })
			switch {
			case u.poison == nil:
				r.Poison = val{Err: "no poison queue"}
			default:
				each.Go(func() {
					r.Poison = readVal(ctx, func(ctx context.Context) (int, error) { return u.readPoison.Depth(ctx) })
				})
			}
			if u.caps.Peek == nil {
				r.Age = val{Err: "the queue cannot be peeked"}
			} else {
				each.Go(func() {
					r.Age = readVal(ctx, func(ctx context.Context) (int, error) {
						a, err := azdispatch.OldestAge(ctx, u.read)
						return int(a), err
					})
				})
			}
			each.Wait()
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
		add("account-depth:"+accountKey(a), agg.Depth)
		add("account-poison:"+accountKey(a), agg.Poison)
		add("account-age:"+accountKey(a), agg.Age)
	}
	h.costs.sample(now, h.totals)
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

// accountKey names an account in the dashboard's history: its name and its
// endpoint's host, since two accounts may share a name (two emulators, or
// one name in two clouds) and must not share a sparkline.
func accountKey(a *azdispatch.Account) string { return a.Name() + "@" + a.Host() }
