package orders_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"

	orders "example.com/orders"
)

// The service's integration test: a sharded queue over two accounts of a
// private Azurite, a publisher and a listener, every order shipped once.
func TestOrdersAreShippedAcrossTwoAccounts(t *testing.T) {
	emulator := azuritetest.Start(t, &azuritetest.Options{Accounts: 2})
	var accounts []*azdispatch.Account
	for i := range emulator.Accounts() {
		account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		accounts = append(accounts, account)
	}
	shards, err := azdispatch.AccountShards("orders", 4, accounts...)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := azdispatch.NewShardedQueue("orders", shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := queue.Create(ctx); err != nil {
		t.Fatal(err)
	}

	publisher, err := azdispatch.NewPublisher[orders.Order](queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := publisher.Send(ctx, orders.Order{ID: i}); err != nil {
			t.Fatal(err)
		}
	}
	// One order too large for a queue message: offloaded to a blob in the
	// first account, and read back by the listener.
	big := orders.Order{ID: n, Note: strings.Repeat("x", 100<<10)}
	if _, err := publisher.Send(ctx, big); err != nil {
		t.Fatal(err)
	}

	shipped := make(chan orders.Order, n+1)
	listener, err := azdispatch.NewListener(queue, orders.Ship(shipped), nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var run sync.WaitGroup
	run.Go(func() {
		if err := listener.Run(runCtx); err != nil {
			t.Error(err)
		}
	})
	// Stopped and waited for however the test ends, a failure included.
	t.Cleanup(func() { stop(); run.Wait() })
	seen := map[int]bool{}
	for len(seen) < n+1 {
		select {
		case o := <-shipped:
			if o.ID == n && len(o.Note) != len(big.Note) {
				t.Errorf("the large order arrived with a note of %d bytes", len(o.Note))
			}
			seen[o.ID] = true
		case <-ctx.Done():
			t.Fatalf("shipped %d of %d orders", len(seen), n+1)
		}
	}
	stop()
	run.Wait()
	if s := listener.State(); s.Succeeded != n+1 || s.Poisoned != 0 {
		t.Errorf("succeeded %d, poisoned %d; want %d and 0", s.Succeeded, s.Poisoned, n+1)
	}
}
