// Command sharded runs the pieces of a sharded deployment in one process:
// a sharded queue over several storage accounts (each a private Azurite
// process), two distributors of which only the lease holder publishes, and
// two workers that each drain their own half of the shards. Halfway through,
// the active distributor stops (as in a redeploy) and the other takes over.
//
//	go run ./examples/sharded
//	go run ./examples/sharded -accounts 3 -shards 9 -jobs 2000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
)

// Job is the unit of work; Customer keys it, so one worker sees all of a
// customer's jobs.
type Job struct {
	Seq      int    `json:"seq"`
	Customer string `json:"customer"`
}

type config struct {
	accounts, shards, jobs int
	verbose                bool
}

func main() {
	var c config
	flag.IntVar(&c.accounts, "accounts", 3, "storage accounts (each a private Azurite process)")
	flag.IntVar(&c.shards, "shards", 6, "queues in the sharded queue, spread over the accounts")
	flag.IntVar(&c.jobs, "jobs", 600, "jobs to distribute")
	flag.BoolVar(&c.verbose, "v", false, "log what the lease and the shards do")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "sharded:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	accounts, stop, err := startAccounts(ctx, c.accounts)
	defer stop()
	if err != nil {
		return err
	}
	shards, err := azdispatch.AccountShards(fmt.Sprintf("jobs%d", time.Now().UnixNano()%1e9), c.shards, accounts...)
	if err != nil {
		return err
	}
	tasks, err := azdispatch.NewShardedQueue("jobs", shards, &azdispatch.ShardedQueueOptions{Logger: logger})
	if err != nil {
		return err
	}
	if err := tasks.Create(ctx); err != nil {
		return err
	}
	fmt.Printf("sharded queue %q: %d shards over %d accounts\n", tasks.Name(), c.shards, c.accounts)

	w, err := startWorkers(ctx, tasks, 2, c.jobs)
	if err != nil {
		return err
	}
	published, err := distribute(ctx, accounts[0], tasks, c.jobs, logger)
	if err != nil {
		w.stop()
		return err
	}
	select {
	case <-w.allHandled:
	case <-time.After(2 * time.Minute): // the report says what is missing
	}
	w.stop()
	return w.report(c, published)
}

// startAccounts starts n private Azurite processes (azuritetest: it needs
// Node.js), one per account, or opens the account
// AZURE_STORAGE_CONNECTION_STRING names n times.
func startAccounts(ctx context.Context, n int) ([]*azdispatch.Account, func(), error) {
	var emulators []*azuritetest.Server
	stop := func() {
		for _, em := range emulators {
			_ = em.Close()
		}
	}
	var accounts []*azdispatch.Account
	for range n {
		cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
		if cs == "" {
			em, err := azuritetest.New(ctx, nil)
			if err != nil {
				return nil, stop, err
			}
			emulators = append(emulators, em)
			cs = em.ConnectionString(0)
		}
		a, err := azdispatch.NewAccountFromConnectionString(cs, nil)
		if err != nil {
			return nil, stop, err
		}
		accounts = append(accounts, a)
	}
	return accounts, stop, nil
}

// distribute runs two distributors contending for one lease. The holder
// publishes jobs, keyed by customer, from a shared cursor (a real
// distributor would keep it in storage); after half of them it stops, and
// the other takes over. It returns how many each published.
func distribute(ctx context.Context, lockAccount *azdispatch.Account, tasks *azdispatch.ShardedQueue, jobs int, logger *slog.Logger) ([2]int, error) {
	publisher, err := azdispatch.NewPublisher[Job](tasks, nil)
	if err != nil {
		return [2]int{}, err
	}
	// A distributor that cannot publish gives up within two minutes.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	lockName := fmt.Sprintf("distributor-%d", time.Now().UnixNano())
	var next atomic.Int64
	var published [2]atomic.Int64
	var active atomic.Int32
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		lease, err := azdispatch.NewLease(lockAccount, lockName, &azdispatch.LeaseOptions{
			Duration: 15 * time.Second, AcquireEvery: 500 * time.Millisecond, Logger: logger.With("distributor", i),
		})
		if err != nil {
			return [2]int{}, err
		}
		wg.Go(func() {
			errs[i] = lease.Run(ctx, func(ctx context.Context) error {
				if n := active.Add(1); n != 1 {
					return fmt.Errorf("%d distributors active at once", n)
				}
				defer active.Add(-1)
				fmt.Printf("distributor %d holds the lease and publishes from job %d\n", i, next.Load())
				for {
					seq := int(next.Load())
					if seq >= jobs {
						return nil
					}
					if seq == jobs/2 && published[i].Load() > 0 {
						fmt.Printf("distributor %d stops (a redeploy) and releases the lease\n", i)
						return nil
					}
					job := Job{Seq: seq, Customer: fmt.Sprintf("customer-%d", seq%20)}
					if _, err := publisher.SendKeyed(ctx, job.Customer, job); err != nil {
						return err
					}
					published[i].Add(1)
					next.Add(1)
				}
			})
		})
	}
	// Each distributor's Run returns when its turn ends: the first one's
	// after half of the jobs, the other's once all jobs are out.
	wg.Wait()
	return [2]int{int(published[0].Load()), int(published[1].Load())}, errors.Join(errs...)
}
