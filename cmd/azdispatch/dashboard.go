package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch/dashboard"
)

// defaultDashboardAddr is where the dashboard listens unless told: the
// loopback interface, so that nothing but this machine can reach a page
// that has no authentication of its own.
const defaultDashboardAddr = "127.0.0.1:8080"

func runDashboard(ctx context.Context, c *cli, args []string) error {
	var o common
	var addr string
	var write bool
	var opts dashboard.Options
	o.target.several = true
	fs := c.flagSet("dashboard", "dashboard (-queue NAME | -base NAME -shards N | -prefix PREFIX)... [-addr HOST:PORT] [-write] [flags]",
		`Serves the web dashboard of queues and sharded sets (the dashboard package): depths,
poison messages, payloads, schedules, latency and cost, refreshed in the browser.

It shows every target given, in the order given: repeat -queue for several queues, and
-base for several sets, each -base with its own -shards (the first -shards goes with the
first -base, and so on). All of them are in the accounts given: a -queue in the one account,
the shards of a set spread over the accounts as for one set. Payloads and schedules are read
from the first account's -payload-container. For example:

  azdispatch dashboard -queue orders -queue invoices -base events -shards 4

Read-only unless -write, which enables requeue, purge, test sends and sweeps (each confirmed on a page).
It listens on `+defaultDashboardAddr+` by default; the dashboard has no authentication of its own,
so binding elsewhere (-addr 0.0.0.0:8080) warns: put it behind a proxy with TLS and sign-in.
It runs until interrupted (Ctrl-C).`)
	o.register(fs)
	fs.StringVar(&addr, "addr", defaultDashboardAddr, "the `host:port` to listen on (port 0: any free port)")
	fs.BoolVar(&write, "write", false, "enable the actions: requeue, purge, send, sweep")
	fs.DurationVar(&opts.CacheFor, "cache", 10*time.Second, "how long one reading of the queues serves every viewer")
	fs.DurationVar(&opts.Refresh, "refresh", 10*time.Second, "how often open pages refresh (negative: never)")
	fs.DurationVar(&opts.TargetAge, "target-age", 0, "the oldest-message age to measure queues against (0: none)")
	fs.Float64Var(&opts.PricePer10K, "price", 0, "the price of 10,000 transactions, for the cost page (0: counts only)")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	// The targets are opened (and each set's -shards checked against the
	// queues that exist) within -timeout; serving is not bounded.
	octx, cancel := o.withTimeout(ctx)
	ts, err := o.target.openAll(octx, c, needQueue)
	cancel()
	if err != nil {
		return err
	}
	var names []string
	for _, t := range ts {
		switch {
		case t.queue != nil:
			opts.Sources = append(opts.Sources, t.queue)
		case t.set != nil:
			opts.Sources = append(opts.Sources, t.set)
		default:
			opts.Sources = append(opts.Sources, t.sharded)
		}
		names = append(names, t.name())
	}
	opts.Payloads = ts[0].store
	opts.Write = write
	opts.Logger = slog.New(slog.NewTextHandler(c.stderr, nil))
	h, err := dashboard.New(&opts)
	if err != nil {
		return usageError{err}
	}
	defer h.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErrorf("-addr %s: %w", addr, err)
	}
	if !loopback(ln.Addr()) {
		fmt.Fprintf(c.stderr, "azdispatch: WARNING: the dashboard listens on %s, beyond this machine, without TLS or authentication: anyone who can reach it sees the queues%s. Put it behind a proxy that does both, or use the default %s.\n",
			ln.Addr(), map[bool]string{true: " and can requeue and delete messages", false: ""}[write], defaultDashboardAddr)
	}
	mode := "read-only"
	if write {
		mode = "write mode: actions enabled"
	}
	fmt.Fprintf(c.stdout, "azdispatch dashboard of %s (%s) on http://%s/\n", strings.Join(names, ", "), mode, ln.Addr())
	c.emitted = true

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 5 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// loopback reports whether a listener's address is reachable from this
// machine only.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
