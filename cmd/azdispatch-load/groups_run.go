package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch"
)

// groupsRun is one variant's run, as its coordinator sees it.
type groupsRun struct {
	cfg      groupsConfig
	seed     int64
	variant  string
	rng      *lockedRand
	progress io.Writer
	born     time.Time
	exe, dir string
	// accts are the emulators' connection strings (they hold the key:
	// never printed): the first holds the groups' blobs and the
	// continuations' queue, each other a children's queue. One emulator
	// per queue keeps the pauses each takes to clean up its deleted
	// messages short (see keys_shards.go), and off the path from a
	// child's finish to its group's continuation.
	accts keysAccounts

	queues []string
	done   string
	acct   *groupsAccounts // this process's: StartGroup and the sends
	store  *azdispatch.PayloadStore
	pubs   []*azdispatch.Publisher[groupsChild]
	then   *azdispatch.Publisher[groupsNext]

	limit  *rate.Limiter  // the soak's sends; nil: as fast as they go
	wg     sync.WaitGroup // the workers' stdout readers
	procs  []*groupsProc  // the running incarnation of each slot (the chaos loop's)
	paused *groupsProc

	mu            sync.Mutex
	all           []*groupsProc
	groups        map[string]*groupsSpec
	order         []string       // groups in the order started
	ends          map[[2]any]int // a child's handler ends, by group and index
	firstEnd      map[[2]any]int64
	nexts         map[string][]groupsNext2   // continuations handled, by group
	traces        map[[2]string][2]int64     // big: by group and step, the last one's start and end
	took          map[string][]time.Duration // big: every step's time, by step, since the last breakdown
	sent, ended   int                        // children sent (distinct), and ended (distinct)
	kills, pauses int
}

// groupsSpec is a group as started: what its continuation must say.
type groupsSpec struct {
	id    string
	size  int
	rule  azdispatch.GroupRule
	fails map[int]bool
	// sentAll is set once every child is sent.
	sentAll bool
}

// groupsNext2 is a continuation handled: its message, when, and what it said.
type groupsNext2 struct {
	id      string
	at      int64
	outcome *azdispatch.GroupOutcome
}

// groupsProc is one worker process: a slot's incarnation.
type groupsProc struct {
	*child
	slot, number int

	mu    sync.Mutex
	blob  int64 // requests, as last reported
	all   int64
	dups  int64
	heard bool
}

func (p *groupsProc) hasReported() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.heard }
func (p *groupsProc) slotName() string  { return fmt.Sprintf("worker %d", p.slot) }
func (p *groupsProc) procName() string {
	return fmt.Sprintf("worker %d (process %d of it)", p.slot, p.number)
}

// run sets the variant up on a fresh emulator, runs it, and judges.
func (r *groupsRun) run(ctx context.Context) (groupsRecord, error) {
	ems, err := startKeysEmulators(ctx, max(2, r.cfg.Queues))
	if err != nil {
		return groupsRecord{}, err
	}
	defer ems.close()
	if r.dir, err = os.MkdirTemp("", "load-groups-"); err != nil {
		return groupsRecord{}, err
	}
	keep := true
	defer func() {
		if !keep {
			_ = os.RemoveAll(r.dir)
		}
	}()
	if r.exe, err = os.Executable(); err != nil {
		return groupsRecord{}, err
	}
	r.accts = ems.accounts()
	r.groups, r.ends, r.firstEnd, r.nexts = map[string]*groupsSpec{}, map[[2]any]int{}, map[[2]any]int64{}, map[string][]groupsNext2{}
	r.traces, r.took = map[[2]string][2]int64{}, map[string][]time.Duration{}
	if err := r.open(ctx); err != nil {
		return groupsRecord{}, err
	}
	defer r.wg.Wait()
	defer func() { killRunning(r.procs) }() // on an early return; a no-op after the workers stopped
	for i := range r.cfg.Workers {
		p, err := r.start(i, 1)
		if err != nil {
			return groupsRecord{}, err
		}
		r.procs = append(r.procs, p)
	}
	if err := awaitReports(ctx, r.procs); err != nil {
		return groupsRecord{}, err
	}
	begin := time.Now()
	if r.variant == "big" {
		err = r.big(ctx)
	} else {
		err = r.soak(ctx)
	}
	if r.paused != nil {
		_ = resumeProcess(r.paused.cmd.Process)
		r.paused = nil
	}
	if err != nil {
		return groupsRecord{}, err
	}
	r.mu.Lock()
	all := append([]*groupsProc(nil), r.all...)
	r.mu.Unlock()
	if err := stopChildren(r.procs, all, 30*time.Second); err != nil {
		return groupsRecord{}, err
	}
	rec := r.judge(time.Since(begin))
	keep = !rec.OK
	return rec, nil
}

// open creates the queues, and this process's accounts (with lost answers
// on its sends), store and publishers.
func (r *groupsRun) open(ctx context.Context) error {
	faults := r.cfg.Publisher
	if r.variant == "big" {
		faults = faultRates{}
	}
	transport := &faultTransport{next: newHTTPClient(), rng: newLockedRand(r.seed, 1), rates: faults, note: func(*http.Request, string, requestOp, string) {}}
	accts, err := openGroupsAccounts(r.accts, transport)
	if err != nil {
		return err
	}
	r.acct = accts
	if r.store, err = accts.blobs.PayloadStore(""); err != nil {
		return err
	}
	run := queueName("g")
	r.done = run + "-next"
	dq, err := accts.blobs.Queue(r.done)
	if err != nil {
		return err
	}
	if err := dq.Create(ctx); err != nil {
		return err
	}
	if r.then, err = azdispatch.NewPublisher[groupsNext](dq, nil); err != nil {
		return err
	}
	for i := range r.cfg.Queues {
		name := fmt.Sprintf("%s-%d", run, i)
		q, err := accts.queue(i, name)
		if err != nil {
			return err
		}
		if err := q.Create(ctx); err != nil {
			return err
		}
		p, err := azdispatch.NewPublisher[groupsChild](q, nil)
		if err != nil {
			return err
		}
		r.queues, r.pubs = append(r.queues, name), append(r.pubs, p)
	}
	return nil
}

// groupsAccounts are a groups process's accounts, opened: the one of the
// blobs and the continuations, and those of the children's queues.
type groupsAccounts struct {
	blobs  *azdispatch.Account
	queues []*azdispatch.Account
}

func openGroupsAccounts(cs keysAccounts, transport policy.Transporter) (*groupsAccounts, error) {
	var a groupsAccounts
	for i, c := range cs {
		acct, err := azdispatch.NewAccountFromConnectionString(c, &azdispatch.AccountOptions{
			Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{Transport: transport}},
		})
		if err != nil {
			return nil, err
		}
		if i == 0 {
			a.blobs = acct
		} else {
			a.queues = append(a.queues, acct)
		}
	}
	return &a, nil
}

// queue opens children's queue i, on its emulator.
func (a *groupsAccounts) queue(i int, name string) (*azdispatch.Queue, error) {
	return a.queues[i%len(a.queues)].Queue(name)
}

// requests sums every account's transactions: the blob requests, and all.
func (a *groupsAccounts) requests() (blob, all int64) {
	for _, acct := range append([]*azdispatch.Account{a.blobs}, a.queues...) {
		tx := acct.Transactions()
		blob, all = blob+tx.Blob(), all+tx.Total()
	}
	return blob, all
}

// start runs incarnation number of slot.
func (r *groupsRun) start(slot, number int) (*groupsProc, error) {
	p := &groupsProc{slot: slot, number: number}
	cfg := groupsWorkerConfig{Queues: r.queues, Done: r.done, Seed: r.seed, Stream: uint64(1000 + slot*1000 + number),
		Concurrency: r.cfg.Concurrency, Hold: r.cfg.Hold, Transient: r.cfg.Transient, Faults: r.cfg.Faults, Visibility: r.cfg.Visibility}
	if r.variant == "big" {
		// A longer visibility: a child is not delivered again while its
		// finish waits on a busy emulator.
		cfg.Transient, cfg.Faults, cfg.Trace, cfg.Visibility = 0, faultRates{}, true, 30*time.Second
	}
	env, err := groupsRole.env(cfg, r.accts.joined())
	if err != nil {
		return nil, err
	}
	c, err := startChild(r.exe, env, filepath.Join(r.dir, fmt.Sprintf("worker%d-%d.stderr", slot, number)), &r.wg,
		func(line []byte) { r.reported(p, line) })
	if err != nil {
		return nil, fmt.Errorf("worker %d: %w", slot, err)
	}
	p.child = c
	r.mu.Lock()
	r.all = append(r.all, p)
	r.mu.Unlock()
	return p, nil
}

// reported takes one line of a worker's stdout.
func (r *groupsRun) reported(p *groupsProc, line []byte) {
	var rep groupsReport
	if json.Unmarshal(line, &rep) != nil {
		return
	}
	switch rep.Kind {
	case "tx":
		p.mu.Lock()
		p.blob, p.all, p.dups, p.heard = rep.Blob, rep.All, rep.Duplicates, true
		p.mu.Unlock()
	case "end":
		r.mu.Lock()
		k := [2]any{rep.G, rep.I}
		if r.ends[k] == 0 {
			r.firstEnd[k] = rep.At
			r.ended++
		}
		r.ends[k]++
		r.mu.Unlock()
	case "trace":
		r.mu.Lock()
		k := [2]string{rep.G, rep.What}
		if rep.What == "next-send" {
			k = [2]string{"", rep.What} // the send names no group: the latest is the group's
		}
		r.took[rep.What] = append(r.took[rep.What], time.Duration(rep.Done-rep.At))
		if prev, ok := r.traces[k]; !ok || rep.Done > prev[1] {
			r.traces[k] = [2]int64{rep.At, rep.Done}
		}
		r.mu.Unlock()
	case "next":
		r.mu.Lock()
		r.nexts[rep.G] = append(r.nexts[rep.G], groupsNext2{id: rep.ID, at: rep.At, outcome: rep.Outcome})
		r.mu.Unlock()
	}
}

// startGroup starts a group and sends its children, 16 at a time over
// the queues at random; a send that fails is tried again, as a steady
// producer would.
func (r *groupsRun) startGroup(ctx context.Context, spec *groupsSpec) error {
	then, err := azdispatch.ContinueWith(r.then, groupsNext{G: spec.id})
	if err != nil {
		return err
	}
	g, err := r.store.StartGroup(ctx, spec.size, then, &azdispatch.GroupOptions{ID: spec.id, Rule: spec.rule})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.groups[spec.id] = spec
	r.order = append(r.order, spec.id)
	r.mu.Unlock()
	order := r.rng.perm(spec.size)
	const senders = 16
	err = fanOut(senders, func(s int) error {
		for k := s; k < len(order); k += senders {
			if r.limit != nil {
				if err := r.limit.Wait(ctx); err != nil {
					return err
				}
			}
			i := order[k]
			pub := r.pubs[r.rng.intN(len(r.pubs))]
			body := groupsChild{G: spec.id, I: i, Fail: spec.fails[i]}
			giveUp := time.Now().Add(2 * time.Minute)
			for {
				_, err := pub.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
				if err == nil {
					break
				}
				if ctx.Err() != nil || time.Now().After(giveUp) {
					return fmt.Errorf("child %d of %s: %w", i, spec.id, err)
				}
				if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
					return err
				}
			}
			r.mu.Lock()
			r.sent++
			r.mu.Unlock()
		}
		return nil
	})
	r.mu.Lock()
	spec.sentAll = err == nil
	r.mu.Unlock()
	return err
}

// waitFor waits until cond holds, or the deadline passes (false).
func (r *groupsRun) waitFor(ctx context.Context, deadline time.Time, cond func() bool) (bool, error) {
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// settled reports whether every group started has what it expects: each
// child handled, and the continuation if its rule is met. r.mu is held.
func (r *groupsRun) settled() bool {
	for _, id := range r.order {
		g := r.groups[id]
		if !g.sentAll || (g.expectsNext() && len(r.nexts[id]) == 0) {
			return false
		}
	}
	return r.ended >= r.sent
}

// expectsNext says whether the group's rule will be met.
func (g *groupsSpec) expectsNext() bool {
	return g.rule != azdispatch.ContinueOnFailure || len(g.fails) > 0
}

// logf prints a progress line.
func (r *groupsRun) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, "groups %s %5.1fs: %s\n", r.variant, time.Since(r.born).Seconds(), fmt.Sprintf(format, args...))
}
