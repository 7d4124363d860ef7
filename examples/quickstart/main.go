// Command quickstart sends a few hundred orders to a queue, some of which
// fail and one of which is not even JSON, processes them with a Listener,
// and prints what happened to every message.
//
// It starts a private Azurite (the Azure Storage emulator) unless
// AZURE_STORAGE_CONNECTION_STRING names a running emulator or a storage account.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
)

// Order is the message type: what a web tier would put on the queue.
type Order struct {
	ID     int     `json:"id"`
	Amount float64 `json:"amount"`
}

func main() {
	orders := flag.Int("orders", 300, "orders to send")
	verbose := flag.Bool("v", false, "log what the listener does")
	flag.Parse()
	if err := run(*orders, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(orders int, verbose bool) error {
	ctx := context.Background()
	cs, where, stop, err := connectionString(ctx)
	if err != nil {
		return err
	}
	defer stop()

	account, err := azdispatch.NewAccountFromConnectionString(cs, nil)
	if err != nil {
		return err
	}
	queue, err := account.Queue(fmt.Sprintf("quickstart-%d", time.Now().UnixNano()%1e9))
	if err != nil {
		return err
	}

	// Send the orders, and one message that is not an order at all.
	publisher, err := azdispatch.NewPublisher[Order](queue, nil)
	if err != nil {
		return err
	}
	sendCtx, publishing := azdispatch.CountTransactions(ctx) // what sending costs, counted apart
	for i := 1; i <= orders; i++ {
		if _, err := publisher.Send(sendCtx, Order{ID: i, Amount: float64(i) * 1.5}); err != nil {
			return err
		}
	}
	if _, err := queue.Send(sendCtx, "this is not an order", nil); err != nil {
		return err
	}
	sent := orders + 1
	fmt.Printf("sent %d messages to queue %q on %s\n", sent, queue.Name(), where)

	// Every 10th order fails on its first try (a flaky downstream); every
	// 97th always fails and ends in the poison queue.
	handler := func(ctx context.Context, m *azdispatch.Message[Order]) error {
		switch {
		case m.Body.ID%97 == 0:
			return fmt.Errorf("order %d: payment provider rejects it", m.Body.ID)
		case m.Body.ID%10 == 0 && m.DequeueCount == 1:
			return errors.New("inventory service timed out")
		}
		return nil
	}
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// A dequeuer that finds the queue empty signals idle: then the
	// listener may be done with every message.
	idle := make(chan struct{}, 1)
	listener, err := azdispatch.NewListener(queue, handler, &azdispatch.ListenerOptions{
		MaxDequeueCount: 3,                                                       // three tries, then poison
		Retry:           azdispatch.ExponentialRetry(time.Second, 4*time.Second), // quick retries for a demo
		Logger:          logger,
		OnEvent: func(e azdispatch.Event) {
			if e.Kind == azdispatch.EventIdle {
				select {
				case idle <- struct{}{}:
				default: // a signal is pending already
				}
			}
		},
	})
	if err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- listener.Run(runCtx) }()
	// Wait until the queue is found empty with every message handled or
	// poisoned (messages waiting to be retried are hidden, not gone), or two
	// minutes pass.
	waitCtx, cancelWait := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelWait()
	for s := listener.State(); s.Succeeded+s.Poisoned < int64(sent) && waitCtx.Err() == nil; s = listener.State() {
		select {
		case <-idle:
		case <-waitCtx.Done():
		}
	}
	elapsed := time.Since(start)
	stop()
	if err := <-done; err != nil {
		return err
	}

	s := listener.State()
	tx := s.Transactions
	fmt.Printf("\nafter %.1fs:\n", elapsed.Seconds())
	fmt.Printf("  processed  %4d  handled and deleted\n", s.Succeeded)
	fmt.Printf("  retried    %4d  failed, hidden for a retry delay, tried again\n", s.Retried)
	fmt.Printf("  poisoned   %4d  moved to %q\n", s.Poisoned, queue.PoisonQueue().Name())
	fmt.Printf("  transactions by the listener: %d = %.2f per message (%d receives, %d of them empty; %d deletes; %d updates; %d poison-queue sends, %d create)\n",
		tx.Total(), float64(tx.Total())/float64(sent), tx.Receive, tx.EmptyReceive, tx.Delete, tx.Update, tx.Send, tx.Create)
	pub := publishing()
	fmt.Printf("  transactions by the publisher: %d (%d sends, %d create)\n", pub.Total(), pub.Send, pub.Create)

	// What the poison queue holds: the original text and why.
	poisoned, err := queue.PoisonQueue().Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
	if err != nil {
		return err
	}
	for _, d := range poisoned {
		env, err := azdispatch.ParsePoison(d.Text)
		if err != nil {
			return err
		}
		fmt.Printf("  poison: %q (dequeued %d times): %s\n", env.Body, env.DequeueCount, env.Reason)
	}

	if s.Succeeded+s.Poisoned != int64(sent) {
		return fmt.Errorf("accounted for %d of %d messages", s.Succeeded+s.Poisoned, sent)
	}
	fmt.Printf("\nevery message accounted for: %d processed + %d poisoned = %d sent\n", s.Succeeded, s.Poisoned, sent)
	return nil
}

// connectionString is the storage account's connection string: the one
// AZURE_STORAGE_CONNECTION_STRING names, or, without it, a private Azurite
// (the Azure Storage emulator, which needs Node.js) started for the run,
// which stop ends.
func connectionString(ctx context.Context) (cs, where string, stop func(), err error) {
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		return cs, "the account in AZURE_STORAGE_CONNECTION_STRING", func() {}, nil
	}
	emulator, err := azuritetest.New(ctx, nil)
	if err != nil {
		return "", "", nil, err
	}
	return emulator.ConnectionString(0), "a private Azurite", func() { _ = emulator.Close() }, nil
}
