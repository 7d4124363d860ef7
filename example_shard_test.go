package azdispatch_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// exampleShardedQueue opens n fresh shards in the examples' account.
func exampleShardedQueue(name string, n int) *azdispatch.ShardedQueue {
	account, err := azdispatch.NewAccountFromConnectionString(connectionString(), nil)
	if err != nil {
		panic(err)
	}
	shards, err := azdispatch.AccountShards(fmt.Sprintf("%s%d", name, time.Now().UnixNano()%1e9), n, account)
	if err != nil {
		panic(err)
	}
	tasks, err := azdispatch.NewShardedQueue(name, shards, nil)
	if err != nil {
		panic(err)
	}
	return tasks
}

// A sharded queue spreads messages over shards (here 4 queues in one
// account; in production, queues in several accounts, each opened with its
// own credential), and a listener drains it like any queue.
func ExampleShardedQueue() {
	ctx := context.Background()
	tasks := exampleShardedQueue("tasks", 4)
	publisher, err := azdispatch.NewPublisher[Order](tasks, nil)
	if err != nil {
		panic(err)
	}
	for id := 1; id <= 8; id++ {
		if _, err := publisher.Send(ctx, Order{ID: id}); err != nil {
			panic(err)
		}
	}
	for _, shard := range tasks.Shards() {
		n, _ := shard.Depth(ctx)
		fmt.Println("messages on a shard:", n)
	}

	var mu sync.Mutex
	var ids []int
	handled := make(chan struct{}, 8)
	listener, err := azdispatch.NewListener(tasks, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, m.Body.ID)
		handled <- struct{}{}
		return nil // deleted through the shard it came from
	}, nil)
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	timeout := time.After(time.Minute)
	for range 8 {
		select {
		case <-handled:
		case <-timeout:
			panic("the messages were not all handled within a minute")
		}
	}
	stop()
	<-done
	sort.Ints(ids)
	fmt.Println("handled:", ids)
	// Output:
	// messages on a shard: 2
	// messages on a shard: 2
	// messages on a shard: 2
	// messages on a shard: 2
	// handled: [1 2 3 4 5 6 7 8]
}

// Keyed sends keep every message of a key on one shard, and Subset gives
// each of n listener instances its own shards, so one instance sees all of
// a customer's messages.
func ExampleShardedQueue_Subset() {
	ctx := context.Background()
	tasks := exampleShardedQueue("keyed", 6)
	publisher, err := azdispatch.NewPublisher[Order](tasks, nil)
	if err != nil {
		panic(err)
	}
	for id := 1; id <= 3; id++ {
		if _, err := publisher.SendKeyed(ctx, "customer-7", Order{ID: id}); err != nil {
			panic(err)
		}
	}
	shard := azdispatch.KeyShard("customer-7", 6)
	instance := shard % 2 // instance i of 2 reads the shards at positions p with p mod 2 = i
	mine, err := tasks.Subset(instance, 2)
	if err != nil {
		panic(err)
	}
	depth, err := mine.Depth(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("customer-7: shard %d, read by instance %d of 2, whose shards hold %d messages\n", shard, instance, depth)
	// Output:
	// customer-7: shard 2, read by instance 0 of 2, whose shards hold 3 messages
}
