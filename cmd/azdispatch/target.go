package main

import (
	"context"
	"errors"
	"flag"
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

// defaultAccountEnv is the variable read for the connection string when no
// -account-env or -account-url is given: the Azure CLI's own.
const defaultAccountEnv = "AZURE_STORAGE_CONNECTION_STRING"

// listFlag is a flag that may be repeated, keeping every value in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// targetFlags say which queue (or sharded set) a command works on and which
// accounts hold it. Credentials never come from a flag's value, which a
// shell history or a process listing would show: only from the environment,
// or from Microsoft Entra ID with -account-url.
type targetFlags struct {
	queue, base      string
	shards           int
	accountEnv       listFlag
	accountURL       listFlag
	payloadContainer string
	retries          int
}

func (f *targetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.queue, "queue", "", "the `name` of one queue")
	fs.StringVar(&f.base, "base", "", "the base `name` of a sharded set: queues <base>-0 … <base>-(N-1)")
	fs.IntVar(&f.shards, "shards", 0, "how many shards (`N`) the set named by -base has")
	fs.Var(&f.accountEnv, "account-env", "an environment `variable` holding an account's connection string; repeat for a set over several accounts, in order (default "+defaultAccountEnv+")")
	fs.Var(&f.accountURL, "account-url", "an account's queue service `URL` (https://<account>.queue.core.windows.net), signed in with DefaultAzureCredential; repeat for several accounts")
	fs.StringVar(&f.payloadContainer, "payload-container", "azdispatch-payloads", "the blob `container` of offloaded payloads, in the first account")
	fs.IntVar(&f.retries, "retries", 3, "SDK retries of a failed request (0 for none)")
}

// target is what the flags name, opened.
type target struct {
	accounts []*azdispatch.Account
	labels   []string // per account, for output: its name, as the depth endpoint gives it (with where it came from when names repeat); never a credential
	queue    *azdispatch.Queue
	sharded  *azdispatch.ShardedQueue
	store    *azdispatch.PayloadStore // nil when the account has no blob service
	storeErr error                    // why store is nil
}

// queueRequired says whether a command needs -queue or -base.
type queueRequired bool

const (
	needQueue queueRequired = true
	anyQueue  queueRequired = false // sweep: the queue only narrows it
)

// open checks the flags and opens the accounts and the queue they name.
// Every credential read is registered with red before anything can fail.
func (f *targetFlags) open(c *cli, need queueRequired) (*target, error) {
	switch {
	case f.queue != "" && f.base != "":
		return nil, usageErrorf("give -queue or -base, not both")
	case bool(need) && f.queue == "" && f.base == "":
		return nil, usageErrorf("name a queue with -queue, or a sharded set with -base and -shards")
	case f.base != "" && bool(need) && f.shards < 1:
		return nil, usageErrorf("-base needs -shards, 1 or more")
	case f.shards != 0 && f.base == "":
		return nil, usageErrorf("-shards needs -base")
	case len(f.accountEnv) > 0 && len(f.accountURL) > 0:
		return nil, usageErrorf("give accounts with -account-env or with -account-url, not both")
	case f.retries < 0:
		return nil, usageErrorf("-retries must not be negative")
	}
	opts := &azdispatch.AccountOptions{Client: &azqueue.ClientOptions{}}
	opts.Client.Retry = policy.RetryOptions{MaxRetries: int32(f.retries), TryTimeout: 30 * time.Second}
	// An operator at a prompt learns at once that nothing listens at the
	// endpoint (a wrong port, an emulator not started), rather than after
	// the SDK's retries.
	opts.Client.Transport = netx.FailFast{Next: http.DefaultClient}
	if f.retries == 0 {
		opts.Client.Retry.MaxRetries = -1 // the SDK reads 0 as its default of 3
	}
	t := &target{}
	if len(f.accountURL) > 0 {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("DefaultAzureCredential: %w", err)
		}
		for _, raw := range f.accountURL {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" || u.Scheme == "" {
				return nil, usageErrorf("-account-url %q is not a URL", c.red.redact(raw))
			}
			if u.RawQuery != "" {
				// A SAS in the URL would be a secret in a flag.
				return nil, usageErrorf("-account-url must not carry a query (a SAS belongs in a connection string in the environment)")
			}
			a, err := azdispatch.NewAccount(raw, cred, opts)
			if err != nil {
				return nil, err
			}
			t.accounts = append(t.accounts, a)
			t.labels = append(t.labels, u.Host)
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
				return nil, usageErrorf("environment variable %s is empty or unset: it must hold the account's connection string", v)
			}
			a, err := azdispatch.NewAccountFromConnectionString(conn, opts)
			if err != nil {
				return nil, fmt.Errorf("account from %s: %w", v, err)
			}
			t.accounts = append(t.accounts, a)
			t.labels = append(t.labels, v)
		}
	}
	t.labels = accountLabels(t.accounts, t.labels)
	if f.queue != "" && len(t.accounts) > 1 {
		return nil, usageErrorf("-queue takes one account; a set over several accounts is named with -base and -shards")
	}
	t.store, t.storeErr = t.accounts[0].PayloadStore(f.payloadContainer)
	if t.storeErr != nil && !errors.Is(t.storeErr, azdispatch.ErrNoBlobService) {
		return nil, usageError{t.storeErr}
	}
	var err error
	switch {
	case f.queue != "":
		t.queue, err = t.accounts[0].Queue(f.queue)
	case f.base != "" && f.shards > 0:
		var shards []azdispatch.Shard
		shards, err = azdispatch.AccountShards(f.base, f.shards, t.accounts...)
		if err == nil {
			t.sharded, err = azdispatch.NewShardedQueue(f.base, shards, nil)
		}
	}
	if err != nil {
		return nil, usageError{err}
	}
	return t, nil
}

// name is the queue's or the set's name, as publishers record it.
func (t *target) name() string {
	switch {
	case t.queue != nil:
		return t.queue.Name()
	case t.sharded != nil:
		return t.sharded.Name()
	}
	return ""
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
	}
	out := make([]unit, len(qs))
	for i, q := range qs {
		out[i] = unit{queue: q, account: t.labels[i%len(t.labels)]}
		if pq, ok := q.(azdispatch.PoisonQueuer); ok {
			out[i].poison = pq.PoisonShard()
		}
	}
	return out
}

// existence is a queue that can say whether it exists, as a *Queue can.
type existence interface {
	Exists(ctx context.Context) (bool, error)
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
		q, ok := sh.(existence)
		if !ok {
			found.Add(1) // cannot say: taken as there
			continue
		}
		wg.Go(func() {
			exists, err := q.Exists(ctx)
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
func (f *targetFlags) openPayloads(c *cli) (*target, string, error) {
	t, err := f.open(c, anyQueue)
	if err != nil {
		return nil, "", err
	}
	if t.store == nil {
		return nil, "", fmt.Errorf("the first account has no blob service for payloads: %w", t.storeErr)
	}
	queue := f.queue
	if queue == "" {
		queue = f.base
	}
	return t, queue, nil
}
