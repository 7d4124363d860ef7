package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ShardHealth is one shard's state as its ShardedQueue sees it.
type ShardHealth struct {
	Shard     string    // the shard's name
	Healthy   bool      // false while it is backed off after failures
	Failures  int64     // failures in a row, of the shard or of its whole account
	RetryAt   time.Time // when a backed-off shard is tried again
	LastError error     // the failure that backed it off
}

// throttledMax caps the back-off of a shard that answers 503 ServerBusy
// (its queue, or its account's requests, ingress or egress, over target).
// Such a shard is alive and over a target that is a rate per second: it
// takes requests again within about a second, and a longer pause would only
// leave its share undrained while its back-off grows with every 503 (the
// simulated load test's drain-unpaced variant throttles shards this way).
// Other 503s, like other failures, back off up to RetryMax.
const throttledMax = time.Second

// Health returns the state of each shard of this view, in order.
func (s *ShardedQueue) Health() []ShardHealth {
	now := s.set.now()
	out := make([]ShardHealth, len(s.members))
	for p, i := range s.members {
		failures, until, last := s.set.retryAt(i)
		out[p] = ShardHealth{Shard: s.set.shards[i].Name(), Healthy: s.set.available(i, now), Failures: failures, LastError: last}
		if !out[p].Healthy {
			out[p].RetryAt = until
		}
	}
	return out
}

// available reports whether shard i may be asked at now: neither it nor its
// account is backed off.
func (set *shardSet) available(i int, now time.Time) bool {
	if open, _ := set.health[i].Open(now); open {
		return false
	}
	if g := set.group[i]; g != nil {
		if open, _ := g.Open(now); open {
			return false
		}
	}
	return true
}

// retryAt is shard i's failure count, the end of its back-off and its last
// error, whichever of its own and its account's breakers is open longer.
func (set *shardSet) retryAt(i int) (int64, time.Time, error) {
	failures, until, last := set.health[i].State()
	if g := set.group[i]; g != nil {
		if gf, gu, gl := g.State(); gu.After(until) {
			failures, until, last = gf, gu, gl
		}
	}
	return failures, until, last
}

// record updates shard i's breakers with the outcome of a request.
func (set *shardSet) record(ctx context.Context, i int, err error) {
	if err == nil {
		recovered := set.health[i].Succeed()
		if g := set.group[i]; g != nil && g.Succeed() {
			recovered = true
		}
		if recovered {
			set.log.Info("shard recovered", "shard", set.shards[i].Name())
		}
		return
	}
	shard, account := fault(ctx, err)
	if !shard {
		return
	}
	b := set.health[i]
	if account && set.group[i] != nil {
		b = set.group[i]
	}
	maxWait := set.opts.RetryMax
	if throttled(err) {
		maxWait = max(set.opts.RetryMin, min(maxWait, throttledMax))
	}
	now := set.now()
	n, wait := b.Fail(now, err, set.opts.RetryMin, maxWait)
	if hinted := hintedWait(err, wait); hinted > wait {
		// The service said when it will take requests again: asking
		// before then only earns another 503.
		b.Hold(now.Add(hinted))
		wait = hinted
	}
	set.log.Warn("shard backed off", "shard", set.shards[i].Name(), "whole_account", account && set.group[i] != nil,
		"failures", n, "retry_in", wait, "err", err)
}

// noHealthy is the error of a request no shard of this view could serve.
// The wait it names is its own shards': another view of the same set may
// hold shards that are not backed off at all.
func (s *ShardedQueue) noHealthy(op string, errs []error, now time.Time) error {
	set := s.set
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s on %q: %w", ErrNoHealthyShard, op, set.name, errors.Join(errs...))
	}
	next := time.Time{}
	for _, i := range s.members {
		if _, until, _ := set.retryAt(i); next.IsZero() || until.Before(next) {
			next = until
		}
	}
	return fmt.Errorf("%w: %s on %q: every shard is backed off; the first is tried again in %v",
		ErrNoHealthyShard, op, set.name, max(next.Sub(now), 0).Round(time.Millisecond))
}
