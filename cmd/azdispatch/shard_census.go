package main

// How the command knows a sharded set's size. The library keeps it
// nowhere: a set is its queues <base>-0 … <base>-(N-1), shard i in account
// i mod the number of accounts, and N lives in each publisher's and
// listener's configuration. What the service can tell is which of those
// queues exist, by listing each account's queues that start with "<base>-"
// (one request per account). That census settles a mismatch either way:
//
//   - a queue <base>-i (or its poison queue) with i ≥ N exists: the set has
//     more shards than -shards says, and the command would leave them out
//     (and a keyed send would pick the wrong shard);
//   - the highest i that exists is below N−1: the set has fewer, and the
//     command would show queues that do not exist (and a send would put
//     messages where no listener reads).
//
// Either is a usage error (exit 2) that names both numbers. A shard is
// created by its first send, so a set whose last shards never got a
// message reads as smaller than it is; the error says so, and a reading
// command run with the smaller count loses nothing, since a queue never
// created holds nothing. A gap below the highest shard is such a shard too:
// it is shown as missing, not as empty. The CLI's own send creates a new
// set whole, so that a set it started always reads back at its size.
//
// Listing needs permission to list the account's queues; where it is
// refused, the command says so on stderr and goes on without the check,
// still marking each shard that does not exist as missing.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/azdispatch/azdispatch"
)

// shardCensus is which shards of a set have a queue, or a poison queue, in
// the accounts given.
type shardCensus struct {
	base  string
	where map[int][]int // shard index → the accounts (by position) holding its queue or poison queue
}

// countShards lists the queues of each account that may be shards of base.
func countShards(ctx context.Context, base string, accounts []*azdispatch.Account, labels []string) (*shardCensus, error) {
	s := &shardCensus{base: base, where: map[int][]int{}}
	prefix := base + "-"
	for j, a := range accounts {
		names, err := a.QueueNames(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("listing the queues of %s: %s: %w", labels[j], refusal(err), err)
		}
		for _, name := range names {
			if i, ok := shardIndex(strings.TrimPrefix(name, prefix)); ok && !slices.Contains(s.where[i], j) {
				s.where[i] = append(s.where[i], j)
			}
		}
	}
	return s, nil
}

// shardIndex reads the i of "<i>" or "<i>-poison", the rest of a shard's
// name or its poison queue's after "<base>-"; another set whose name
// starts with the same base ("orders-eu-0" for "orders") is no shard.
func shardIndex(rest string) (int, bool) {
	rest = strings.TrimSuffix(rest, "-poison")
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// found is the number of shards the queues that exist make: the highest
// index found, plus one (0 if none).
func (s *shardCensus) found() int {
	if len(s.where) == 0 {
		return 0
	}
	return slices.Max(slices.Collect(maps.Keys(s.where))) + 1
}

// exists reports whether shard i has a queue or a poison queue.
func (s *shardCensus) exists(i int) bool { return len(s.where[i]) > 0 }

// check compares the census with -shards n over accounts labelled labels.
// A set none of whose shards exist passes: reading commands say "no such
// queue", and send creates it.
func (s *shardCensus) check(n int, labels []string) error {
	found := s.found()
	switch {
	case found == 0:
		return nil
	case found > n:
		var extra []string
		for i := n; i < found; i++ {
			if s.exists(i) {
				extra = append(extra, s.named(i, labels))
			}
		}
		return usageErrorf("-shards %d does not match the set %s: it has at least %d shards, since %s; give -shards %d",
			n, s.base, found, exist(extra), found)
	case found < n:
		return usageErrorf("-shards %d does not match the set %s: the queues that exist make %d shards, the last %s; %s in any of the accounts given. Give -shards %d; if the set does have %d shards, the missing ones were never created (a listener with CreateQueue, or ShardedQueue.Create, creates them)",
			n, s.base, found, s.named(found-1, labels), s.absent(found, n), found, n)
	}
	for i := range n {
		if where := s.where[i]; len(where) > 0 && !slices.Contains(where, i%len(labels)) {
			return usageErrorf("shard %s exists, but not in %s, where the order of the accounts given puts it (shard i is in account i mod %d): give the accounts in the order the set's publishers do",
				s.named(i, labels), labels[i%len(labels)], len(labels))
		}
	}
	return nil
}

// named is shard i's queue with the accounts it was found in.
func (s *shardCensus) named(i int, labels []string) string {
	var in []string
	for _, j := range s.where[i] {
		in = append(in, labels[j])
	}
	return fmt.Sprintf("%s-%d (in %s)", s.base, i, strings.Join(in, " and "))
}

// absent says that shards from to to-1 do not exist.
func (s *shardCensus) absent(from, to int) string {
	switch to - from {
	case 1:
		return fmt.Sprintf("%s-%d does not exist", s.base, from)
	case 2:
		return fmt.Sprintf("%s-%d and %s-%d do not exist", s.base, from, s.base, from+1)
	}
	return fmt.Sprintf("%s-%d … %s-%d do not exist", s.base, from, s.base, to-1)
}

// exist says that the shards named exist, the last few left out.
func exist(shards []string) string {
	const most = 3
	switch {
	case len(shards) == 1:
		return shards[0] + " exists"
	case len(shards) > most:
		return strings.Join(shards[:most], ", ") + fmt.Sprintf(" and %d more exist", len(shards)-most)
	}
	return strings.Join(shards, ", ") + " exist"
}

// refusal says in a few words why a listing failed: the service's status
// and code where it answered.
func refusal(err error) string {
	var se *azdispatch.StorageError
	if errors.As(err, &se) && se.StatusCode != 0 {
		return strings.TrimSpace(fmt.Sprintf("%d %s", se.StatusCode, se.Code))
	}
	return "no answer"
}

// takeCensus checks a sharded target's -shards against the queues that
// exist, and keeps the census for the command. Where the accounts' queues
// cannot be listed, it says so on stderr and checks nothing.
func (t *target) takeCensus(ctx context.Context, c *cli) error {
	if t.sharded == nil {
		return nil
	}
	n := len(t.sharded.Shards())
	census, err := countShards(ctx, t.base, t.accounts, t.labels)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		why, _, _ := strings.Cut(err.Error(), ": azdispatch: ") // what the service answered, not the library's restatement
		fmt.Fprintf(c.stderr, "azdispatch: cannot check -shards %d against the shards of %s that exist (%s); going on without the check: a shard that does not exist is shown as missing\n",
			n, t.base, c.red.redact(why))
		return nil
	}
	t.shards = census
	return census.check(n, t.labels)
}
