package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// keysConfig sizes the keys scenario; the zero value is its defaults, and
// a test shrinks it.
type keysConfig struct {
	Keys, Each  int           // keys, and messages of each
	Procs       int           // listener processes
	Concurrency int           // each process's handlers per dequeuer
	Dequeuers   int           // each process's dequeuers
	Hold        time.Duration // a handler call's time
	Depth       int           // the most messages kept in the queue while it is filled
	Emulators   int           // emulators the queue is spread over (see keysAccounts)
	Only        string        // a variant's name: that one alone (with no limit first, for the ratio)
	Keep        bool          // keep the processes' stderr files
	KillAt      float64       // share of the messages handled when a process is killed
	Faults      faultRates    // each process's storage faults on queue requests
}

func (c keysConfig) withDefaults() keysConfig {
	setIf(&c.Keys, 1000)
	setIf(&c.Each, 50)
	setIf(&c.Procs, 3)
	setIf(&c.Concurrency, 8)
	setIf(&c.Dequeuers, 2)
	setIf(&c.Hold, 100*time.Millisecond)
	setIf(&c.KillAt, 0.4)
	setIf(&c.Depth, 1000)
	setIf(&c.Emulators, 1)
	if c.Faults == (faultRates{}) {
		c.Faults = faultRates{ServerBusy: 0.005, Timeout: 0.002, LostReceive: 0.002, LostDelete: 0.002, LostUpdate: 0.002}
	}
	return c
}

// handlers is the fleet's handler count: every process's.
func (c keysConfig) handlers() int { return c.Procs * c.Concurrency * c.Dequeuers }

// keysRecord is one line of the keys scenario's -json output.
type keysRecord struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	OK       bool   `json:"ok"`

	Messages  int     `json:"messages"`
	Keys      int     `json:"keys"`
	Handlers  int     `json:"handlers"`   // the fleet's
	HandlerMS float64 `json:"handler_ms"` // a call's time
	MsgsPerS  float64 `json:"msgs_per_s"` // between the tenth and the ninetieth in ten handled
	Ratio     float64 `json:"ratio_vs_unlimited,omitempty"`

	Lost       int `json:"lost"`            // sent, never handled
	Left       int `json:"left_in_queue"`   // the queue's approximate depth at the end (late messages, or copies of sends retried)
	Repeated   int `json:"repeated"`        // handler calls past a message's first (at least once: the kill, lost answers)
	Poisoned   int `json:"poisoned"`        // on the poison queue at the end
	Overlaps   int `json:"overlaps"`        // calls of one key that overlapped another of the key (per-key)
	OutOfOrder int `json:"out_of_order"`    // in-order: a message's first call started before an earlier one of its key's
	MostAtOnce int `json:"most_at_once"`    // handler calls at once, all processes
	Limit      int `json:"limit,omitempty"` // fleet: the limit

	LeasesPerMsg float64 `json:"lease_requests_per_msg"` // Lease Blob requests, processes that ended well
	TxPerMsg     float64 `json:"tx_per_msg"`             // every request of theirs
	Snoozed      int64   `json:"snoozed"`
	Killed       int     `json:"killed"`
	// EmulatorCores is the emulators' CPU over the run, in cores, all
	// together: near 1 with one emulator, its one thread is the limit, and
	// every request of a variant's costs throughput, as it would not
	// against the service.
	EmulatorCores float64 `json:"emulator_cores"`
	// Emulators is how many emulators hold the queue's shards; with more
	// than one, the blobs are on one more of their own.
	Emulators int `json:"emulators"`
}

// runKeys compares three listener processes over one queue of Keys × Each
// keyed messages with no limit, with one at a time per key across the
// processes (leases), and with a fleet limit equal to their handler count,
// each with storage faults and a process killed mid-run.
func runKeys(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	c := o.keys.withDefaults()
	dir, err := os.MkdirTemp("", "azdispatch-keys-")
	if err != nil {
		return nil, nil, err
	}
	if c.Keep {
		fmt.Fprintf(progress, "keys: the processes' stderr is kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	variants := []struct {
		name   string
		limits azdispatch.LimitOptions
	}{
		{"unlimited", azdispatch.LimitOptions{}},
		{"per-key", azdispatch.LimitOptions{PerKey: 1, AcrossInstances: true}},
		{"fleet", azdispatch.LimitOptions{Fleet: c.handlers()}},
		{"in-order", azdispatch.LimitOptions{InOrder: true}},
	}
	var recs []record
	var lines []string
	var base float64
	for i, v := range variants {
		if i > 0 && c.Only != "" && v.name != c.Only {
			continue
		}
		fmt.Fprintf(progress, "keys: %s, %d keys × %d messages over %d processes\n", v.name, c.Keys, c.Each, c.Procs)
		r, err := keysVariant(ctx, c, dir, v.name, v.limits, int64(o.seed)+int64(i))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", v.name, err)
		}
		if i == 0 {
			base = r.MsgsPerS
		} else {
			r.Ratio = r.MsgsPerS / base
		}
		// Order costs waits by design (a message that comes before the one
		// it follows is snoozed): its rate is reported, not held to 0.9.
		r.OK = r.Lost == 0 && r.Poisoned == 0 && r.Overlaps == 0 && r.OutOfOrder == 0 &&
			(i == 0 || v.limits.InOrder || r.Ratio >= 0.9) && (r.Limit == 0 || r.MostAtOnce <= r.Limit)
		recs = append(recs, record{Own: r})
		lines = append(lines, fmt.Sprintf("%s: %.0f msgs/s (%.2f× unlimited), %d overlaps of a key, %d out of order, at most %d calls at once (limit %d), %.2f lease requests and %.2f requests in all per message, %d snoozed, %d lost (%d of them left in the queue), %d poisoned, emulator %.2f cores (ok %v)",
			r.Variant, r.MsgsPerS, r.Ratio, r.Overlaps, r.OutOfOrder, r.MostAtOnce, r.Limit, r.LeasesPerMsg, r.TxPerMsg, r.Snoozed, r.Lost, r.Left, r.Poisoned, r.EmulatorCores, r.OK))
	}
	return recs, lines, nil
}

// keysCall is one handler call: its process, key, message and times.
type keysCall struct {
	proc       int
	key        string
	n          int
	start, end int64
}

// keysVariant runs one variant on an emulator of its own: one that ran
// another variant before would stall to clean up its deleted messages
// (thousands of them) and slow this one down.
func keysVariant(ctx context.Context, c keysConfig, dir, variant string, limits azdispatch.LimitOptions, seed int64) (keysRecord, error) {
	ems, err := startKeysEmulators(ctx, c.Emulators)
	if err != nil {
		return keysRecord{}, err
	}
	defer ems.close()
	cpu0, err := ems.cpu()
	if err != nil {
		return keysRecord{}, err
	}
	start := time.Now()
	r, err := keysRun(ctx, c, ems.accounts(), dir, variant, limits, seed)
	r.Emulators = c.Emulators
	if cpu1, cerr := ems.cpu(); err == nil && cerr == nil {
		r.EmulatorCores = (cpu1 - cpu0).Seconds() / time.Since(start).Seconds()
	}
	return r, err
}

// keysRun is one variant's run.
func keysRun(ctx context.Context, c keysConfig, accts keysAccounts, dir, variant string, limits azdispatch.LimitOptions, seed int64) (keysRecord, error) {
	r := keysRecord{Scenario: "keys", Variant: variant, Messages: c.Keys * c.Each, Keys: c.Keys, Handlers: c.handlers(), HandlerMS: ms(c.Hold), Limit: limits.Fleet}
	queue := queueName("keys")
	q, _, err := accts.open(queue, newHTTPClient())
	if err != nil {
		return r, err
	}
	if err := q.Create(ctx); err != nil {
		return r, err
	}
	exe, err := os.Executable()
	if err != nil {
		return r, err
	}
	var (
		mu      sync.Mutex
		open    = map[[2]int]keysCall{} // by process and message: calls started
		calls   []keysCall
		handled = map[int]int{}
		states  []keysCounts
		wg      sync.WaitGroup
	)
	start := func(proc int) (*child, error) {
		env, err := keysRole.env(keysWorkerConfig{Queue: queue, Seed: seed, Stream: uint64(proc + 1), Limits: limits,
			Concurrency: c.Concurrency, Dequeuers: c.Dequeuers, Hold: c.Hold, Faults: c.Faults}, accts.joined())
		if err != nil {
			return nil, err
		}
		return startChild(exe, env, filepath.Join(dir, fmt.Sprintf("%s-%d.stderr", variant, proc)), &wg, func(line []byte) {
			var rep keysReport
			if json.Unmarshal(line, &rep) != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case rep.Final != nil:
				states = append(states, *rep.Final)
			case rep.S != 0:
				open[[2]int{proc, rep.N}] = keysCall{proc: proc, key: rep.Key, n: rep.N, start: rep.S}
			case rep.E != 0:
				handled[rep.N]++
				call, ok := open[[2]int{proc, rep.N}]
				if !ok {
					// Its start was closed at the kill (a line the killed
					// process wrote as it died): counted, no call of its
					// own, or it would seem to run from the epoch on.
					break
				}
				delete(open, [2]int{proc, rep.N})
				call.end = rep.E
				calls = append(calls, call)
			}
		})
	}
	var procs []*child
	for p := range c.Procs {
		ch, err := start(p)
		if err != nil {
			return r, err
		}
		procs = append(procs, ch)
	}
	defer func() {
		for _, p := range procs {
			if !p.exited() {
				p.kill()
			}
		}
		wg.Wait()
	}()
	// The fill runs beside the processes, and ends before this run does.
	fillCtx, stopFill := context.WithCancel(ctx)
	fillErr := make(chan error, 1)
	go func() { fillErr <- fillKeyed(fillCtx, q, c.Keys, c.Each, c.Depth, seed) }()
	filled := false
	defer func() {
		stopFill()
		if !filled {
			<-fillErr
		}
	}()
	count := func() (int, error) {
		if !filled {
			select {
			case err := <-fillErr:
				filled = true
				if err != nil {
					return 0, fmt.Errorf("filling the queue: %w", err)
				}
			default:
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(handled), nil
	}
	deadline := time.Now().Add(time.Duration(r.Messages)*c.Hold/time.Duration(max(1, c.handlers()/4)) + 3*time.Minute)
	if err := waitHandled(ctx, count, int(c.KillAt*float64(r.Messages)), deadline); err != nil {
		return r, err
	}
	// Kill the first process; its calls under way end now, as far as
	// overlaps go. A new one takes its place.
	procs[0].kill()
	killedAt := time.Now().UnixNano()
	r.Killed = 1
	mu.Lock()
	for k, call := range open {
		if k[0] == 0 {
			call.end = killedAt
			calls = append(calls, call)
			delete(open, k)
		}
	}
	mu.Unlock()
	ch, err := start(c.Procs)
	if err != nil {
		return r, err
	}
	procs = append(procs, ch)
	if err := waitHandled(ctx, count, r.Messages, deadline); err != nil {
		return r, err
	}
	for _, p := range procs[1:] {
		p.command("stop")
		p.closeStdin()
	}
	for _, p := range procs[1:] {
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			p.kill()
		}
	}
	wg.Wait()
	poisoned, err := q.PoisonQueue().Depth(ctx)
	if err != nil {
		return r, err
	}
	r.Poisoned += poisoned
	if r.Left, err = q.Depth(ctx); err != nil {
		return r, err
	}
	mu.Lock()
	defer mu.Unlock()
	judgeKeys(&r, calls, handled, states, limits.PerKey > 0 || limits.InOrder, limits.InOrder)
	return r, nil
}

// waitHandled waits until count reaches n, or the deadline passes, or
// count fails.
func waitHandled(ctx context.Context, count func() (int, error), n int, deadline time.Time) error {
	for time.Now().Before(deadline) {
		got, err := count()
		if err != nil || got >= n {
			return err
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// judgeKeys fills in r's figures from the calls made, the messages handled
// and the final states of the processes that ended well: overlaps of a
// key's calls if perKey, calls out of their key's order if ordered.
func judgeKeys(r *keysRecord, calls []keysCall, handled map[int]int, states []keysCounts, perKey, ordered bool) {
	r.Lost = r.Messages - len(handled)
	for _, n := range handled {
		r.Repeated += n - 1
	}
	if len(calls) == 0 {
		return
	}
	slices.SortFunc(calls, func(a, b keysCall) int { return int(a.start - b.start) })
	byKey := map[string]int64{}  // a key's latest end so far
	var ends []int64             // ends of the calls under way, for the most at once
	firstDone := map[int]int64{} // a message's first call's end
	started := map[int]bool{}    // messages whose first call started
	lastOf := map[string]int{}   // a key's highest message started
	for _, call := range calls {
		if ordered && !started[call.n] {
			// Each key's messages are sent in the order of their numbers
			// (see fillKeyed): a first call of a lower number after a
			// higher one is out of order.
			started[call.n] = true
			if call.n < lastOf[call.key] {
				r.OutOfOrder++
			}
			lastOf[call.key] = max(lastOf[call.key], call.n)
		}
		if e, ok := firstDone[call.n]; !ok || call.end < e {
			firstDone[call.n] = call.end
		}
		if perKey {
			if e, ok := byKey[call.key]; ok && call.start < e {
				r.Overlaps++
			}
			byKey[call.key] = max(byKey[call.key], call.end)
		}
		ends = slices.DeleteFunc(ends, func(e int64) bool { return e <= call.start })
		ends = append(ends, call.end)
		r.MostAtOnce = max(r.MostAtOnce, len(ends))
	}
	r.MsgsPerS = middleRate(firstDone)
	var leases, total, handledByThem int64
	for _, s := range states {
		leases += s.Transactions.BlobLease
		r.Poisoned += int(s.Poisoned)
		total += s.Transactions.Total()
		handledByThem += s.Succeeded
		r.Snoozed += s.Snoozed
	}
	if handledByThem > 0 {
		r.LeasesPerMsg = float64(leases) / float64(handledByThem)
		r.TxPerMsg = float64(total) / float64(handledByThem)
	}
}

// middleRate is the messages handled per second between the tenth and
// the ninetieth in ten to be handled: the kill falls within it, the
// start-up and the wait for the messages the killed process held at the
// end do not.
func middleRate(done map[int]int64) float64 {
	ends := slices.Sorted(maps.Values(done))
	if len(ends) < 10 {
		return 0
	}
	lo, hi := len(ends)/10, len(ends)*9/10
	return float64(hi-lo) / time.Duration(ends[hi]-ends[lo]).Seconds()
}

// fillKeyed sends keys × each messages, body the message's number, key
// "key-<number mod keys>", in a random order of keys. Each key's messages
// are sent by one sender, one after another, in the order of their
// numbers: the order a listener with Limits.InOrder keeps. It keeps the
// queue at most about depth deep, as a steady producer would: Azurite's
// receives slow down past about 1,000 messages held, which would measure
// the emulator rather than the listeners.
func fillKeyed(ctx context.Context, q azdispatch.Shard, keys, each, depth int, seed int64) error {
	p, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	if err != nil {
		return err
	}
	room, stop := pace(ctx, q, depth)
	defer stop()
	order := rand.New(rand.NewPCG(uint64(seed), 7)).Perm(keys * each)
	const senders = 16
	return fanOut(senders, func(s int) error {
		sent := map[int]int{} // by key: how many of its messages this sender sent
		for _, i := range order {
			k := i % keys
			if k%senders != s {
				continue
			}
			if err := room(); err != nil {
				return err
			}
			n := k + keys*sent[k] + 1 // the key's next number, ascending
			sent[k]++
			if err := sendKeyedPatiently(ctx, p, "key-"+strconv.Itoa(n%keys), strconv.Itoa(n)); err != nil {
				return err
			}
		}
		return nil
	})
}

// sendKeyedPatiently sends as a steady producer would: a send that fails
// is tried again for up to two minutes. A keyed message has one shard, and
// over several emulators that shard's may be cleaning up, with the shard
// backed off meanwhile. A send that failed after its message was written
// (an answer that came too late) puts the message in twice: the judge
// counts the copy's call as a repeat, not as a message.
func sendKeyedPatiently(ctx context.Context, p *azdispatch.Publisher[string], key, body string) error {
	giveUp := time.Now().Add(2 * time.Minute)
	for {
		_, err := p.SendKeyed(ctx, key, body)
		if err == nil || ctx.Err() != nil || time.Now().After(giveUp) {
			return err
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// pace reads q's depth every 100 ms until stop is called (stop waits for
// the reads to end), and returns a wait that blocks while the last reading
// is depth or more. A failed reading keeps the last one.
func pace(ctx context.Context, q azdispatch.Source, depth int) (room func() error, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var last atomic.Int64
	read := func() {
		if n, err := q.Depth(ctx); err == nil {
			last.Store(int64(n))
		}
	}
	read()
	var wg sync.WaitGroup
	wg.Go(func() {
		for sleepCtx(ctx, 100*time.Millisecond) == nil {
			read()
		}
	})
	room = func() error {
		for last.Load() >= int64(depth) {
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
		return nil
	}
	return room, func() { cancel(); wg.Wait() }
}
