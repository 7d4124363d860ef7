package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// One emulator cleans up its deleted messages every minute or so and
// answers nothing meanwhile, for a time that grows faster than their
// number (10,000 deleted: about 90 s). A run of 50,000 messages through
// one emulator would measure those pauses. With -emulators n above 1 the
// keys scenario spreads its queue over n emulators, one shard each, through
// a ShardedQueue, and keeps the blobs (the leases of keys and of the fleet,
// the order records) on one more, which no queue request reaches: each
// emulator then holds a fraction of the deleted messages, and its pauses
// are short and fall at different times.

// keysQueue is what the keys scenario reads and fills: a Queue, or a
// ShardedQueue over several emulators.
type keysQueue interface {
	azdispatch.Shard
	azdispatch.PoisonQueuer
	Create(ctx context.Context) error
}

// keysAccounts are the connection strings of a keys run: the first holds
// the blobs, the rest the queue's shards; with one, it holds both. They
// travel to a worker in one variable, a line each (a connection string has
// no line break).
type keysAccounts []string

func (a keysAccounts) joined() string { return strings.Join(a, "\n") }

func splitKeysAccounts(s string) keysAccounts { return strings.Split(s, "\n") }

// queueAccounts are the accounts that hold the queue's shards.
func (a keysAccounts) queueAccounts() []string {
	if len(a) == 1 {
		return a
	}
	return a[1:]
}

// open opens the run's queue and its payload store (the leases' blobs),
// with every request through transport.
func (a keysAccounts) open(queue string, transport policy.Transporter) (keysQueue, *azdispatch.PayloadStore, error) {
	openAcct := func(cs string) (*azdispatch.Account, error) {
		return azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
			Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{Transport: transport}},
		})
	}
	blobAcct, err := openAcct(a[0])
	if err != nil {
		return nil, nil, err
	}
	store, err := blobAcct.PayloadStore("")
	if err != nil {
		return nil, nil, err
	}
	qs := a.queueAccounts()
	if len(qs) == 1 {
		q, err := blobAcct.Queue(queue)
		return q, store, err
	}
	accts := make([]*azdispatch.Account, len(qs))
	for i, cs := range qs {
		if accts[i], err = openAcct(cs); err != nil {
			return nil, nil, err
		}
	}
	shards, err := azdispatch.AccountShards(queue, len(accts), accts...)
	if err != nil {
		return nil, nil, err
	}
	sq, err := azdispatch.NewShardedQueue(queue, shards, &azdispatch.ShardedQueueOptions{Payloads: store})
	return sq, store, err
}

// keysEmulators are the fresh emulators of one variant.
type keysEmulators []*account

// startKeysEmulators starts one emulator, or n for the queue's shards and
// one more for the blobs if n is above 1, all at once.
func startKeysEmulators(ctx context.Context, n int) (keysEmulators, error) {
	if n > 1 {
		n++
	}
	ems := make(keysEmulators, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ems[i], errs[i] = openAccount(ctx, false) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		ems.close()
		return nil, err
	}
	return ems, nil
}

func (ems keysEmulators) accounts() keysAccounts {
	cs := make(keysAccounts, len(ems))
	for i, em := range ems {
		cs[i] = em.connectionString
	}
	return cs
}

// cpu is the emulators' CPU time so far, all together.
func (ems keysEmulators) cpu() (time.Duration, error) {
	var sum time.Duration
	for _, em := range ems {
		c, err := em.cpu()
		if err != nil {
			return 0, fmt.Errorf("emulator CPU: %w", err)
		}
		sum += c.emulator
	}
	return sum, nil
}

func (ems keysEmulators) close() {
	for _, em := range ems {
		if em != nil {
			em.close()
		}
	}
}
