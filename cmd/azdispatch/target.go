package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/netx"
)

// target is one queue or sharded set the flags name, opened.
type target struct {
	accounts []*azdispatch.Account
	labels   []string // per account, for output: its name, as the depth endpoint gives it (with where it came from when names repeat); never a credential
	queue    *azdispatch.Queue
	sharded  *azdispatch.ShardedQueue
	set      *azdispatch.QueueSet     // -prefix: the queues of the first account it finds
	base     string                   // -base, also without -shards (sweep, schedules)
	store    *azdispatch.PayloadStore // nil when the account has no blob service
	storeErr error                    // why store is nil
	// shards is what the queues that exist say of a sharded set; nil for a
	// queue, or when the accounts' queues could not be listed.
	shards *shardCensus
}

// queueRequired says whether a command needs -queue or -base.
type queueRequired bool

const (
	needQueue queueRequired = true
	anyQueue  queueRequired = false // sweep: the queue only narrows it
)

// open checks the flags and opens the accounts and the one queue or set
// they name (none, for a command that takes anyQueue). A sharded set's
// -shards is checked against the queues that exist (see shardCensus) with
// ctx. Every credential read is registered with red before anything can
// fail.
func (f *targetFlags) open(ctx context.Context, c *cli, need queueRequired) (*target, error) {
	ts, err := f.openAll(ctx, c, need)
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// openAll is open for a command that takes several targets: one target
// per -queue and per -base, in the order given (at least one, a target
// with no queue when none was named), sharing the accounts.
func (f *targetFlags) openAll(ctx context.Context, c *cli, need queueRequired) ([]*target, error) {
	if err := f.check(need); err != nil {
		return nil, err
	}
	accounts, labels, err := f.openAccounts(c)
	if err != nil {
		return nil, err
	}
	if len(f.queues()) > 0 && len(accounts) > 1 {
		return nil, usageErrorf("-queue takes one account; a set over several accounts is named with -base and -shards")
	}
	store, storeErr := accounts[0].PayloadStore(f.payloadContainer)
	if storeErr != nil && !errors.Is(storeErr, azdispatch.ErrNoBlobService) {
		return nil, usageError{storeErr}
	}
	var ts []*target
	sets := 0
	for _, spec := range f.specs {
		t := &target{accounts: accounts, labels: labels, store: store, storeErr: storeErr}
		switch {
		case spec.prefix:
			t.set, err = openSet(ctx, accounts[0], spec.name)
		case !spec.sharded:
			t.queue, err = accounts[0].Queue(spec.name)
		case sets < len(f.shards):
			t.base = spec.name
			var shards []azdispatch.Shard
			shards, err = azdispatch.AccountShards(spec.name, f.shards[sets], accounts...)
			if err == nil {
				t.sharded, err = azdispatch.NewShardedQueue(spec.name, shards, nil)
			}
			sets++
		default:
			t.base = spec.name
		}
		var notFound errNoQueuesFound
		switch {
		case errors.As(err, &notFound):
			return nil, err
		case err != nil:
			return nil, usageError{err}
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		ts = append(ts, &target{accounts: accounts, labels: labels, store: store, storeErr: storeErr})
	}
	for _, t := range ts {
		if err := t.takeCensus(ctx, c); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// openAccounts opens the accounts the flags name, with the labels output
// gives them.
func (f *targetFlags) openAccounts(c *cli) ([]*azdispatch.Account, []string, error) {
	opts := &azdispatch.AccountOptions{Client: &azqueue.ClientOptions{}}
	opts.Client.Retry = policy.RetryOptions{MaxRetries: int32(f.retries), TryTimeout: 30 * time.Second}
	// An operator at a prompt learns at once that nothing listens at the
	// endpoint (a wrong port, an emulator not started), rather than after
	// the SDK's retries.
	opts.Client.Transport = netx.FailFast{Next: http.DefaultClient}
	if f.retries == 0 {
		opts.Client.Retry.MaxRetries = -1 // the SDK reads 0 as its default of 3
	}
	var accounts []*azdispatch.Account
	var sources []string
	if len(f.accountURL) > 0 {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, nil, fmt.Errorf("DefaultAzureCredential: %w", err)
		}
		for _, raw := range f.accountURL {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" || u.Scheme == "" {
				return nil, nil, usageErrorf("-account-url %q is not a URL", c.red.redact(raw))
			}
			if u.RawQuery != "" {
				// A SAS in the URL would be a secret in a flag.
				return nil, nil, usageErrorf("-account-url must not carry a query (a SAS belongs in a connection string in the environment)")
			}
			a, err := azdispatch.NewAccount(raw, cred, opts)
			if err != nil {
				return nil, nil, err
			}
			accounts = append(accounts, a)
			sources = append(sources, u.Host)
		}
	} else {
		vars := f.accountEnv
		if len(vars) == 0 {
			vars = listFlag{defaultAccountEnv}
		}
		for _, v := range vars {
			conn := c.getenv(v)
			c.red.add(conn)
			if strings.TrimSpace(conn) == "" {
				return nil, nil, usageErrorf("environment variable %s is empty or unset: it must hold the account's connection string", v)
			}
			a, err := azdispatch.NewAccountFromConnectionString(conn, opts)
			if err != nil {
				return nil, nil, fmt.Errorf("account from %s: %w", v, err)
			}
			accounts = append(accounts, a)
			sources = append(sources, v)
		}
	}
	return accounts, accountLabels(accounts, sources), nil
}

// openSet opens the queue set of the queues of a whose names start with
// prefix: an error if there is none.
func openSet(ctx context.Context, a *azdispatch.Account, prefix string) (*azdispatch.QueueSet, error) {
	// The command's own deadline bounds the listing, not a shard's.
	set, err := azdispatch.DiscoverQueueSet(ctx, prefix, azdispatch.QueueDiscovery{Account: a, Prefix: prefix},
		&azdispatch.QueueSetOptions{ShardedQueueOptions: azdispatch.ShardedQueueOptions{TryTimeout: time.Hour}})
	if err != nil {
		return nil, err
	}
	if len(set.Shards()) == 0 {
		return nil, errNoQueuesFound{prefix}
	}
	return set, nil
}

// errNoQueuesFound is the error of a -prefix that names no queue: most
// likely a mistyped prefix, which must not read as an empty set.
type errNoQueuesFound struct{ prefix string }

func (e errNoQueuesFound) Error() string {
	return fmt.Sprintf("%v: no queue's name starts with %q (is the prefix right?)", errNoSuchQueue, e.prefix)
}

func (e errNoQueuesFound) Unwrap() error { return errNoSuchQueue }

// name is the queue's or the set's name, as publishers record it.
func (t *target) name() string {
	switch {
	case t.queue != nil:
		return t.queue.Name()
	case t.sharded != nil:
		return t.sharded.Name()
	case t.set != nil:
		return t.set.Name()
	}
	return t.base
}

// unit is one queue of the target with its poison queue: the queue itself,
// or one shard.
type unit struct {
	queue   azdispatch.Shard
	poison  azdispatch.Shard // nil if the queue has none
	account string           // the label of its account
}

// units lists the target's queues, in shard order. AccountShards puts shard
// i in account i mod the number of accounts.
func (t *target) units() []unit {
	var qs []azdispatch.Shard
	if t.queue != nil {
		qs = []azdispatch.Shard{t.queue}
	} else if t.sharded != nil {
		qs = t.sharded.Shards()
	} else if t.set != nil {
		qs = t.set.Shards()
	}
	out := make([]unit, len(qs))
	for i, q := range qs {
		out[i] = unit{queue: q, account: t.labels[i%len(t.labels)]}
		if t.set != nil {
			out[i].account = t.labels[0] // a set's queues are all in the first account
		}
		if poison := azdispatch.CapabilitiesOf(q).PoisonQueue; poison != nil {
			out[i].poison = poison()
		}
	}
	return out
}

// locate names the queue called name among the target's: its name and
// account, and its index if it is a shard of a set. A name that is none of
// them (a target that did not say where it sent) is given as the target.
func (t *target) locate(name string) (queue, account string, shard *int) {
	for i, u := range t.units() {
		if u.queue.Name() == name {
			if t.sharded != nil {
				shard = &i
			}
			return name, u.account, shard
		}
	}
	if t.sharded != nil {
		return "", "", nil // which shard is not known: say nothing rather than guess
	}
	return t.name(), t.labels[0], nil
}

// errNoSuchQueue is the error of a command on a queue that does not exist:
// most likely a mistyped name, which must not read as an empty queue.
var errNoSuchQueue = errors.New("no such queue")

// mustExist fails with errNoSuchQueue when the target is known not to
// exist: no queue of it (nor, with poisonToo, a poison queue of it)
// exists, and one at least was found missing. A shard is created when
// first sent to, so some shards of a set missing is normal; a poison
// queue may outlive its queue, and a poison command on it still works. A
// queue whose check fails is not known either way, and fails nothing here:
// the command meets the error itself. One request per queue asked.
func (t *target) mustExist(ctx context.Context, poisonToo bool) error {
	var queues []azdispatch.Shard
	for _, u := range t.units() {
		queues = append(queues, u.queue)
		if poisonToo && u.poison != nil {
			queues = append(queues, u.poison)
		}
	}
	var found, missing atomic.Int32
	var names []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, sh := range queues {
		existsNow := azdispatch.CapabilitiesOf(sh).Exists
		if existsNow == nil {
			found.Add(1) // cannot say: taken as there
			continue
		}
		wg.Go(func() {
			exists, err := existsNow(ctx)
			switch {
			case err != nil:
			case exists:
				found.Add(1)
			default:
				missing.Add(1)
				mu.Lock()
				names = append(names, sh.Name())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if found.Load() > 0 || missing.Load() == 0 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("%w: %s (is the name right? this command creates no queue)", errNoSuchQueue, strings.Join(names, ", "))
}

// peekable is a queue that can be peeked, as a *Queue can.
type peekable interface {
	Peek(ctx context.Context, max int) ([]*azdispatch.Delivery, error)
}

// accountLabels names accounts for output by their account names, as the
// depth endpoint does; where two share a name (two emulators are both
// devstoreaccount1), each gets where it came from too: the variable's
// name or the URL's host.
func accountLabels(accounts []*azdispatch.Account, sources []string) []string {
	count := map[string]int{}
	for _, a := range accounts {
		count[a.Name()]++
	}
	labels := make([]string, len(accounts))
	for i, a := range accounts {
		labels[i] = a.Name()
		if count[a.Name()] > 1 {
			labels[i] += " (" + sources[i] + ")"
		}
	}
	return labels
}

// openPayloads opens the target for a command on its payload container
// (sweep, schedules), which needs the first account's blob service, and
// returns the name payloads and schedules record for it: the queue's, or
// a sharded set's base name.
func (f *targetFlags) openPayloads(ctx context.Context, c *cli) (*target, string, error) {
	t, err := f.open(ctx, c, anyQueue)
	if err != nil {
		return nil, "", err
	}
	if t.store == nil {
		return nil, "", fmt.Errorf("the first account has no blob service for payloads: %w", t.storeErr)
	}
	return t, t.name(), nil
}
