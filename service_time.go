package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch/internal/svcclock"
)

// Every decision about time that crosses machines (is a delayed message
// due, when does a record expire, which occurrence of a schedule is this)
// is taken on the storage service's clock. Each account keeps one,
// corrected by the Date of every answer its clients get, errors included
// (clockPolicy); a decision that needs it before any answer has come
// learns it first with one request (learnServiceTime), rather than take
// this machine's clock for the service's.

// clockPolicy sits in the SDK pipeline's per-retry slot, so that every
// answer, whatever its status, sets the clock of the account it came from,
// and tells a request that asked (see withAnswered) that an answer came.
type clockPolicy struct{ clock *svcclock.Clock }

func (p clockPolicy) Do(req *policy.Request) (*http.Response, error) {
	a, _ := req.Raw().Context().Value(triesKey{}).(*tries)
	if a != nil {
		a.tried.Add(1)
	}
	resp, err := req.Next()
	if resp != nil {
		p.clock.SawHeader(resp.Header)
		if a != nil {
			a.answered.Add(1)
		}
	}
	return resp, err
}

// tries counts the HTTP attempts of the requests made with a context (see
// withTries), and those that got an answer.
type tries struct{ tried, answered atomic.Int32 }

type triesKey struct{}

// withTries returns a copy of ctx whose requests count their attempts,
// and the answers they got: a request cut off by its deadline after the
// service answered (the SDK retrying a 503) is not one that got no answer
// at all, and one whose first attempt got none, retried, may have acted
// before its retry was answered.
func withTries(ctx context.Context) (context.Context, *tries) {
	a := new(tries)
	return context.WithValue(ctx, triesKey{}, a), a
}

// lostAnswer reports whether an attempt went unanswered: it may have
// acted.
func (a *tries) lostAnswer() bool { return a.tried.Load() > a.answered.Load() }

// serviceTimeKnown reports whether q knows the service's time from an
// answer.
func (q *Queue) serviceTimeKnown() bool { return q.clock.Known() }

// serviceTimeKnown reports whether a shard of the set knows the service's
// time from an answer, or keeps a clock of its own.
func (s *ShardedQueue) serviceTimeKnown() bool {
	return slices.ContainsFunc(s.set.caps, Capabilities.serviceTimeKnown)
}

// serviceTimeKnown reports whether c's source knows the service's time from
// an answer: a [*Queue] that has had one, a [ShardedQueue] one of whose
// shards has; a source of its own clock (a memqueue.Queue), or one that
// cannot tell, is taken to know it.
func (c Capabilities) serviceTimeKnown() bool { return c.timeKnown == nil || c.timeKnown() }

// serviceTime is the service's time by the first of cs that knows it; by
// the first that keeps one if none knows it yet; and the local clock's if
// none keeps one.
func serviceTime(cs ...Capabilities) time.Time {
	var first func() time.Time
	for _, c := range cs {
		if c.ServiceTime == nil {
			continue
		}
		if c.serviceTimeKnown() {
			return c.ServiceTime()
		}
		if first == nil {
			first = c.ServiceTime
		}
	}
	if first != nil {
		return first()
	}
	return time.Now()
}

// learnServiceTime makes sure c's source knows the service's time before a
// decision that needs it, with one request if no answer has told it yet. A
// source of its own clock, or one that cannot learn it, is left as it is.
func (c Capabilities) learnServiceTime(ctx context.Context) error {
	if c.learnTime != nil && !c.serviceTimeKnown() {
		return c.learnTime(ctx)
	}
	return nil
}

// learnTime asks for the queue's properties (one Get Queue Properties,
// counted in [Transactions.Depth]) if no answer has told q the service's
// time yet: the answer's Date sets the clock, whatever it says otherwise
// (a queue that does not exist, a credential without the read permission).
// It fails only when no answer came.
func (q *Queue) learnTime(ctx context.Context) error {
	if q.clock.Known() {
		return nil
	}
	_, _, err := q.properties(ctx)
	if q.clock.Known() {
		return nil
	}
	if err == nil {
		err = errors.New("its answer carried no Date")
	}
	return fmt.Errorf("learning the service's time from queue %s: %w", q.name, err)
}

// learnTime learns the service's time from the first shard of the view
// that can tell it, in order: the shards' accounts are taken to share one
// clock, as the service's do.
func (s *ShardedQueue) learnTime(ctx context.Context) error {
	var errs []error
	learners := 0
	for _, i := range s.members {
		learn := s.set.caps[i].learnTime
		if learn == nil {
			continue
		}
		learners++
		if !s.set.admit(i, s.set.now()) {
			continue
		}
		err := s.set.try(ctx, i, 0, true, func(ctx context.Context) error { return learn(ctx) })
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if learners == 0 {
		return nil // shards of one's own, which cannot tell
	}
	return fmt.Errorf("learning the service's time from %s: %w", s.set.name, s.noHealthy("learn the time", errs, s.set.now()))
}
