package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/internal/cputime"
)

// account is where one measured run happens: a fresh private Azurite, or the
// user's own account (with a fresh queue per run).
type account struct {
	connectionString string
	emulator         *azurite.Instance // nil for a real account
}

// openAccount starts a fresh emulator unless real is set.
func openAccount(ctx context.Context, real bool) (*account, error) {
	if real {
		cs := os.Getenv(azurite.EnvConnectionString)
		if cs == "" {
			return nil, fmt.Errorf("-real needs %s to hold a connection string", azurite.EnvConnectionString)
		}
		return &account{connectionString: cs}, nil
	}
	em, err := azurite.Start(ctx, &azurite.Options{Fresh: true})
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, azurite.HowTo)
	}
	return &account{connectionString: em.ConnectionString(), emulator: em}, nil
}

// cpuTimes are the CPU used so far by the emulator and by this process.
type cpuTimes struct{ emulator, client time.Duration }

func (a *account) cpu() (cpuTimes, error) {
	var t cpuTimes
	if a.emulator != nil {
		em, err := a.emulator.CPUTime()
		if err != nil {
			return t, err
		}
		t.emulator = em
	}
	client, err := cputime.Self()
	t.client = client
	return t, err
}

func (a *account) close() {
	if a.emulator != nil {
		_ = a.emulator.Stop()
	}
}

// queueName returns a fresh queue name for one run.
func queueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// payload is the message every scenario sends: about 1 KiB of JSON.
type payload struct {
	Seq int    `json:"seq"`
	Pad string `json:"pad"`
}

var padding = strings.Repeat("x", 1000)

// fill puts n payloads on the queue with parallel senders and no added
// latency, so that every variant starts from the same depth.
func fill(ctx context.Context, cs, queue string, n int) error {
	q, err := openQueue(cs, queue, 0)
	if err != nil {
		return err
	}
	if err := q.Create(ctx); err != nil {
		return err
	}
	p, err := azdispatch.NewPublisher[payload](q, nil)
	if err != nil {
		return err
	}
	const senders = 8
	return fanOut(senders, func(s int) error {
		for i := s; i < n; i += senders {
			if _, err := p.Send(ctx, payload{Seq: i, Pad: padding}); err != nil {
				return err
			}
		}
		return nil
	})
}

// fanOut runs send(0) … send(senders-1) at once, and returns the first
// error of theirs once all have returned.
func fanOut(senders int, send func(s int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		wg.Go(func() {
			if err := send(s); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// queueDepth is a queue's approximate depth.
func queueDepth(ctx context.Context, cs, queue string) (int, error) {
	q, err := openQueue(cs, queue, 0)
	if err != nil {
		return 0, err
	}
	return q.Depth(ctx)
}

// waitUntil polls done until it holds or the deadline passes; it reports
// the time at which it held (or the deadline).
func waitUntil(deadline time.Time, done func() bool) time.Time {
	for !done() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	return time.Now()
}

// openQueue opens queue on its own client, with latency added to every
// request. Listeners and publishers given the same *Queue share it, as they
// would in one process: sends through it wake the listeners.
func openQueue(cs, queue string, latency time.Duration) (*azdispatch.Queue, error) {
	acct, err := azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: latencyTransport{next: newHTTPClient(), delay: latency},
		}},
	})
	if err != nil {
		return nil, err
	}
	return acct.Queue(queue)
}

// runListener runs l until the returned stop is called; stop returns Run's
// result once Run has returned.
func runListener[T any](ctx context.Context, l *azdispatch.Listener[T]) (stop func() error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// warmUp runs n messages through a throwaway queue of a fresh emulator
// (send, receive, delete), leaving it empty, so that a measured run
// does not include the emulator's start-up costs (its JIT compiling the
// receive and delete paths), which every process pays once.
func warmUp(ctx context.Context, cs string, n int) error {
	name := queueName("warmup")
	if err := fill(ctx, cs, name, n); err != nil {
		return err
	}
	acct, err := azdispatch.NewAccountFromConnectionString(cs, nil)
	if err != nil {
		return err
	}
	q, err := acct.Queue(name)
	if err != nil {
		return err
	}
	for done := 0; done < n; {
		batch, err := q.Receive(ctx, azdispatch.MaxBatch, time.Minute)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			break
		}
		for _, d := range batch {
			if err := q.Delete(ctx, d); err != nil {
				return err
			}
		}
		done += len(batch)
	}
	return nil
}
