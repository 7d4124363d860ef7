// Command autoscale shows a Listener that scales with the work and is woken
// from another process. It starts a second copy of itself as the worker: the
// worker runs a Listener that idles at its maximum back-off and serves a
// endpoint.WakeHandler over HTTP; this process publishes through a Publisher whose
// OnSent hook notifies the worker, so each wave of work is picked up in
// milliseconds, not at the next poll. The worker prints its dequeuers
// scaling up for a burst and back down as they go idle.
//
// It starts a private Azurite (the Azure Storage emulator) unless
// AZURE_STORAGE_CONNECTION_STRING names a running emulator or a storage account.
//
//	go run ./examples/autoscale
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/endpoint"
)

// roleEnv marks the copy of this program that runs the worker; the queue's
// name travels in queueEnv and the connection string in the environment too,
// never on a command line, where other users of the machine could read it.
const (
	roleEnv  = "AZDISPATCH_EXAMPLE_ROLE"
	queueEnv = "AZDISPATCH_EXAMPLE_QUEUE"
)

// Order is the message type; SentAt lets the worker show how long each order
// waited between its send and its handler.
type Order struct {
	ID     int       `json:"id"`
	SentAt time.Time `json:"sent_at"`
}

func main() {
	if os.Getenv(roleEnv) == "worker" {
		os.Exit(worker())
	}
	burst := flag.Int("burst", 600, "orders in the burst")
	flag.Parse()
	if err := run(*burst, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "autoscale:", err)
		os.Exit(1)
	}
}

// run is the publishing process: it starts the worker, sends one order, then
// a burst, and waits for the worker to handle them all and scale back down.
func run(burst int, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, _, stop, err := connectionString(ctx)
	if err != nil {
		return err
	}
	defer stop()
	account, err := azdispatch.NewAccountFromConnectionString(cs, nil)
	if err != nil {
		return err
	}
	queue, err := account.Queue(fmt.Sprintf("autoscale-%d", time.Now().UnixNano()%1e9))
	if err != nil {
		return err
	}
	if err := queue.Create(ctx); err != nil {
		return err
	}

	w, err := startWorker(ctx, cs, queue.Name(), out)
	if err != nil {
		return err
	}
	defer w.stop()
	url, err := w.expect("ready ")
	if err != nil {
		return err
	}

	notifier := endpoint.NewNotifier(url, nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	notifyCtx, stopNotifier := context.WithCancel(ctx)
	defer stopNotifier()
	wg.Go(func() { _ = notifier.Run(notifyCtx) })
	publisher, err := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{
		OnSent: func(context.Context, string) { notifier.Notify() },
	})
	if err != nil {
		return err
	}
	send := func(from, to int) error { // from 8 goroutines, as a busy web tier would
		const senders = 8
		errs := make(chan error, senders)
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for id := from + s; id <= to; id += senders {
					if _, err := publisher.Send(ctx, Order{ID: id, SentAt: time.Now()}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}

	fmt.Fprintln(out, "publisher: one order, to an idle worker")
	if err := send(1, 1); err != nil {
		return err
	}
	if _, err := w.expect("order 1 waited"); err != nil {
		return err
	}
	fmt.Fprintf(out, "publisher: a burst of %d orders\n", burst)
	if err := send(2, burst+1); err != nil {
		return err
	}
	if _, err := w.expect(fmt.Sprintf("handled %d so far", burst+1)); err != nil {
		return err
	}
	if w.scaledUp.Load() {
		if _, err := w.expect("scale-down to 1 "); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "publisher: done; stopping the worker")
	return w.stop()
}

// workerProcess is the worker as the publisher sees it: a child process whose
// output lines it echoes and waits on.
type workerProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	lines chan string
	// scaledUp is set once the worker reports a scale-up.
	scaledUp atomic.Bool
	once     sync.Once
	err      error
}

func startWorker(ctx context.Context, cs, queue string, out io.Writer) (*workerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), roleEnv+"=worker", queueEnv+"="+queue,
		"AZURE_STORAGE_CONNECTION_STRING="+cs)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe() // closing it tells the worker to stop
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &workerProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() { // ends when the worker's stdout closes, which Wait in stop waits for
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(out, "  worker:", sc.Text())
			if strings.HasPrefix(sc.Text(), "scale-up") {
				w.scaledUp.Store(true)
			}
			w.lines <- sc.Text()
		}
	}()
	return w, nil
}

// expect waits for a line starting with prefix and returns the rest of it.
func (w *workerProcess) expect(prefix string) (string, error) {
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				return "", errors.New("the worker exited early")
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest, nil
			}
		case <-timeout:
			return "", fmt.Errorf("no %q from the worker within 2 minutes", prefix)
		}
	}
}

// stop closes the worker's stdin and waits for it to exit.
func (w *workerProcess) stop() error {
	w.once.Do(func() {
		_ = w.stdin.Close()
		for range w.lines { // drain, so that the reader can finish
		}
		w.err = w.cmd.Wait()
	})
	return w.err
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
