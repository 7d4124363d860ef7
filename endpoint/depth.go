package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// DepthOptions configures a [DepthHandler]. Nil, or a zero field, means the
// documented default.
type DepthOptions struct {
	// CacheFor is how long a reading is served before a request reads the
	// queue again. Every reading costs one billable Get Queue Properties
	// request per shard (and one Peek Messages per shard for the age,
	// unless [DepthOptions.NoAge]), and an autoscaler, its metrics server
	// and a dashboard may all poll the endpoint (KEDA polls every 30 s by default,
	// and the HPA asks for the metric on its own period besides), so a
	// reading is shared by every request within this time; requests that
	// come while one is being read wait for it rather than reading again.
	// Defaults to 5 s: well under any scaler's period, so scaling sees a
	// fresh number, while a storm of requests costs at most one reading per
	// 5 s. Negative means no cache (requests at the same moment still share
	// one reading).
	CacheFor time.Duration

	// Timeout bounds one reading, all shards in parallel. Defaults to 10 s:
	// a shard that does not answer by then fails the reading, rather than
	// holding the scaler's request until it gives up.
	Timeout time.Duration

	// Logger receives a line for each reading that fails. Defaults to none.
	Logger *slog.Logger

	// NoAge leaves out the age of the oldest message ("oldest_age_s").
	// By default each reading also peeks at the front messages of every
	// shard (see [azdispatch.OldestAge]), in parallel with its depth: one
	// more billable Peek Messages request per shard per reading, so a
	// reading costs two requests per shard instead of one (with the
	// default CacheFor, at most 17,280 more a day per shard for each
	// process serving the endpoint). Set it when nothing scales or alerts
	// on the age, or when the source cannot peek (a [azdispatch.Source] of
	// your own without a Peek method, which [NewDepthHandler] refuses
	// otherwise).
	NoAge bool

	// TargetWait is the time in queue aimed for. Set with
	// [DepthOptions.WorkerRate], it adds "desired_workers" to the answer:
	// how many workers (replicas) it takes to clear the depth within
	// TargetWait (see [DepthHandler] for the rule, and for KEDA). Both or
	// neither must be set, and it must not be negative. Defaults to
	// neither, and no "desired_workers".
	TargetWait time.Duration

	// WorkerRate is how many messages a second one worker (one replica:
	// all its listeners' handler calls together) handles, measured under
	// load, for instance from the Succeeded count of
	// [azdispatch.Listener.State] over a busy minute. Set with
	// [DepthOptions.TargetWait]; it must be a finite number, not
	// negative.
	WorkerRate float64
}

// DepthHandler is an [http.Handler] that serves the approximate depth of a
// queue, or of a whole sharded queue, and the age of its oldest message, as
// JSON for an autoscaler such as KEDA's metrics-api scaler:
//
//	{"queue":"orders","depth":123,"due":80,"oldest_age_s":42,"desired_workers":3,
//	 "at":"2025-01-02T15:04:05.123Z","shards":[
//	  {"name":"orders-0","account":"acct1","host":"acct1.queue.core.windows.net","depth":60,"due":17,"oldest_age_s":42},
//	  {"name":"orders-1","account":"acct2","host":"acct2.queue.core.windows.net","depth":63,"due":63,"oldest_age_s":17}]}
//
// The depth counts every message in the queue, invisible ones (being
// handled, or waiting for a retry) included, as the service's approximate
// count does; "at" is when it was read. For a ShardedQueue it is the sum
// over every shard of the view it was given (give it the whole set, not a
// Subset, to count everything), read from each shard directly: unlike
// [azdispatch.ShardedQueue.Depth], which leaves out shards backed off after
// failures, it never reports a sum that skipped a shard. A queue that does
// not exist counts as empty, as [azdispatch.Queue.Depth] has it, so a
// mistyped name reads as 0; the listeners' readiness is what reports a
// missing queue.
//
// # Age of the oldest message
//
// "oldest_age_s" is how long the oldest of the front messages has
// been waiting, in seconds by the service's clock, as
// [azdispatch.OldestAge] reads it: one peek (of up to 32) per shard,
// made with the depth requests, and for a sharded queue the greatest of
// the shards' ages. It is 0 for an empty queue. It is an approximation:
// the service keeps no strict order, and hidden messages (being handled,
// or waiting for a retry) are not seen. Depth says how much work waits;
// age says whether it waits too long, which depth alone cannot tell
// without knowing how fast the workers go. [DepthOptions.NoAge] turns it
// off, and saves its request.
//
// # Work due now
//
// The depth counts messages sent for later too (delayed, scheduled), which
// no worker can take yet: 10,000 messages due tomorrow read as 10,000. So
// each shard's "due" is the work waiting to be received now: the messages
// its peek saw visible when it saw fewer than 32 (then those are all the
// visible ones), and its depth otherwise, as KEDA's "visibleonly" strategy
// for Azure queues counts. Messages in handlers are hidden like delayed
// ones, so they are not in "due" when the peek is not full: the workers
// holding them exist already, and the listeners within each worker scale
// their own dequeuers; with handlers that run for minutes, keep at least
// one replica and a scale-down stabilization longer than a handler. With
// [DepthOptions.NoAge] (no peek) "due" is the depth.
//
// # Desired workers for a latency target
//
// With [DepthOptions.TargetWait] (W) and [DepthOptions.WorkerRate] (r)
// set, "desired_workers" is how many workers it takes to keep messages'
// time in queue under W. By Little's law the work waiting D (the "due"
// above) is the arrival rate times the time in queue, so clearing D within
// W takes D/W messages a second, and
//
//	desired_workers = ceil(D / (r × W))
//
// which, when messages wait exactly W, is the arrival rate over r: the
// workers that keep up. When the oldest message has already waited longer
// than W, the rule came too late: it assumes the backlog has the whole of
// W still ahead. The answer is then multiplied by age/W, at most 2: at
// least one worker more, the more the later, but never more than twice the
// rule's, since the age is one message's and approximate (a message that
// keeps failing and coming back is old without the queue being slow).
// Nothing is remembered between readings: once the backlog is served
// within W, the factor is gone. It is 0 when the queue is empty, so that
// KEDA may scale to zero, and at least 1 otherwise. Without the age
// ([DepthOptions.NoAge]) it is the rule alone. It scales the replicas;
// within each, [azdispatch.ScalingOptions.TargetWait] scales a
// listener's dequeuers to a target of the same kind.
//
// While the source is paused (see [azdispatch.Pauser]), the answer carries
// "paused" (until when, and by whom) and "desired_workers" 0, with or
// without TargetWait: a scaler that follows desired_workers takes the
// workers down rather than adding some for a backlog that must wait. The
// depth stays what it is. The pause costs no request of its own: a
// queue's Get Queue Properties answers it with the depth (a source of your
// own is asked its PauseState after its Depth).
//
// # KEDA
//
// KEDA's metrics-api scaler GETs the URL and reads the number at
// valueLocation (a GJSON path). With its default AverageValue metric
// type it asks the HPA for ceil(value / targetValue) replicas, so:
//
//   - valueLocation "desired_workers" with targetValue "1" gives
//     replicas = desired_workers: the rule above, with KEDA's fallback
//     replicas when a scrape fails;
//   - valueLocation "oldest_age_s" with targetValue the target in
//     seconds and metricType "Value" makes the HPA scale the current
//     replicas by age/target, which needs no WorkerRate but scales out
//     only once messages are already late (and in whenever they wait less
//     than the target), and KEDA's fallback does not apply to the Value
//     type;
//   - valueLocation "depth" with targetValue the messages per replica
//     scales on depth alone.
//
// If any shard cannot be read (its depth or its age), the answer is 503
// with no "depth", "due", "oldest_age_s" or "desired_workers" at all, an "error",
// and each shard's own error in its entry (with what it did read). A
// partial sum, or a maximum that skipped a shard, would be a falsely low
// number, and an autoscaler that believes it scales in while work waits; a
// failed scrape is an error KEDA reports, and with a fallback in the
// ScaledObject it holds a set replica count instead.
//
// Readings are cached (see [DepthOptions.CacheFor]), failures too, so that a
// failing account is not asked more often than a healthy one. It serves GET
// and HEAD; other methods get 405. Mount it behind whatever authentication
// the process uses: the answer names queues, accounts and each shard's
// "host" (the host and port of its queue service, as [azdispatch.Queue.Host]
// has it, which tells apart two accounts of one name: two emulators, or one
// name in two clouds), never a whole URL, a SAS or a credential.
type DepthHandler struct {
	name   string
	shards []depthShard
	opts   DepthOptions

	mu   sync.Mutex
	last *depthCall // the latest reading, finished or under way
}

// depthShard is one queue whose depth is read: a shard, or the source itself.
type depthShard struct {
	name, account, host string
	src                 azdispatch.Source
}

// depthCall is one reading, shared by the requests that wait for it.
type depthCall struct {
	done    chan struct{} // closed when the reading is finished
	started time.Time     // monotonic: when the reading began, for the cache
	code    int
	body    depthReport
}

// depthReport is the JSON body.
type depthReport struct {
	Queue string `json:"queue"`
	Depth *int   `json:"depth,omitempty"` // absent when a shard failed: no partial sum
	// Due is the work waiting to be received (see DepthHandler), absent
	// when a shard failed.
	Due *int `json:"due,omitempty"`
	// OldestAge, in seconds, is absent with NoAge, and when a shard
	// failed: no maximum that skipped one.
	OldestAge *float64 `json:"oldest_age_s,omitempty"`
	// DesiredWorkers is absent unless TargetWait and WorkerRate are
	// set, and when a shard failed.
	DesiredWorkers *int `json:"desired_workers,omitempty"`
	// Paused is the source's pause while it holds (see [azdispatch.Pauser]).
	Paused *pausedReport `json:"paused,omitempty"`
	At     time.Time     `json:"at"`
	Error  string        `json:"error,omitempty"`
	Shards []shardDepth  `json:"shards"`
}

// pausedReport is a pause, as the depth endpoint shows it.
type pausedReport struct {
	Until time.Time `json:"until"`
	By    string    `json:"by,omitempty"`
}

type shardDepth struct {
	Name      string   `json:"name"`
	Account   string   `json:"account,omitempty"`
	Host      string   `json:"host,omitempty"` // the queue service's host and port; absent for a source without one
	Depth     *int     `json:"depth,omitempty"`
	Due       *int     `json:"due,omitempty"`
	OldestAge *float64 `json:"oldest_age_s,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// NewDepthHandler returns a handler serving src's depth and the age of its
// oldest message: a *[azdispatch.Queue], a *[azdispatch.ShardedQueue]
// (every shard of it), or any [azdispatch.Source] (its Depth, and its Peek
// for the age: one without a Peek method needs [DepthOptions.NoAge]). Nil
// opts means defaults. It returns an [*azdispatch.ConfigError] for options
// out of range.
func NewDepthHandler(src azdispatch.Source, opts *DepthOptions) (*DepthHandler, error) {
	if src == nil {
		return nil, &azdispatch.ConfigError{Field: "source", Reason: "is nil"}
	}
	h := &DepthHandler{name: src.Name()}
	if opts != nil {
		h.opts = *opts
	}
	if err := checkDepthOptions(&h.opts); err != nil {
		return nil, err
	}
	if h.opts.CacheFor == 0 {
		h.opts.CacheFor = 5 * time.Second
	}
	if h.opts.Timeout == 0 {
		h.opts.Timeout = 10 * time.Second
	}
	if h.opts.Logger == nil {
		h.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if shards := azdispatch.CapabilitiesOf(src).Shards; shards != nil {
		for _, sh := range shards() {
			h.shards = append(h.shards, depthShard{name: sh.Name(), account: accountOf(sh), host: hostOf(sh), src: sh})
		}
	} else {
		h.shards = []depthShard{{name: src.Name(), account: accountOf(src), host: hostOf(src), src: src}}
	}
	if !h.opts.NoAge {
		// Refused now rather than at every reading: a source that cannot
		// peek would fail every scrape, and the scaler with it.
		for _, sh := range h.shards {
			if azdispatch.CapabilitiesOf(sh.src).Peek == nil {
				return nil, &azdispatch.ConfigError{Field: "DepthOptions.NoAge",
					Reason: fmt.Sprintf("is false, and %q cannot peek for the age of its oldest message: set NoAge to serve the depth alone", sh.name)}
			}
		}
	}
	return h, nil
}

// checkDepthOptions refuses options out of range.
func checkDepthOptions(o *DepthOptions) error {
	switch {
	case o.Timeout < 0:
		return &azdispatch.ConfigError{Field: "DepthOptions.Timeout", Reason: "must not be negative"}
	case o.TargetWait < 0:
		return &azdispatch.ConfigError{Field: "DepthOptions.TargetWait", Reason: fmt.Sprintf("%v is negative", o.TargetWait)}
	case o.WorkerRate < 0 || math.IsNaN(o.WorkerRate) || math.IsInf(o.WorkerRate, 0):
		return &azdispatch.ConfigError{Field: "DepthOptions.WorkerRate", Reason: fmt.Sprintf("%v is not a rate: it must be a finite number of messages a second, above 0", o.WorkerRate)}
	case o.TargetWait > 0 && o.WorkerRate == 0:
		return &azdispatch.ConfigError{Field: "DepthOptions.WorkerRate", Reason: "must be set with DepthOptions.TargetWait: desired workers need both"}
	case o.WorkerRate > 0 && o.TargetWait == 0:
		return &azdispatch.ConfigError{Field: "DepthOptions.TargetWait", Reason: "must be set with DepthOptions.WorkerRate: desired workers need both"}
	}
	return nil
}

// accountOf names the account a queue of azdispatch lives in; empty for
// a queue opened by its own SAS URL and for sources of other kinds.
func accountOf(s azdispatch.Source) string {
	if account := azdispatch.CapabilitiesOf(s).Account; account != nil && account() != nil {
		return account().Name()
	}
	return ""
}

// hostOf is the host (and port) of a queue's service, as
// [azdispatch.Queue.Host] has it; empty for sources of other kinds.
func hostOf(s azdispatch.Source) string {
	if host := azdispatch.CapabilitiesOf(s).Host; host != nil {
		return host()
	}
	return ""
}

// ServeHTTP answers with the latest reading, reading the queue first if the
// cached one is older than [DepthOptions.CacheFor].
func (h *DepthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	c, err := h.reading(r.Context())
	if err != nil {
		// The client went away while waiting: nobody reads the answer.
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, r, c.code, c.body)
}

// reading returns a finished reading no older than CacheFor: the cached
// one, the one under way, or a new one made by this request. The new one
// is read on a context detached from the request's, so that a client that
// hangs up does not spoil the reading for those waiting on it; Timeout
// bounds it instead.
func (h *DepthHandler) reading(ctx context.Context) (*depthCall, error) {
	h.mu.Lock()
	c := h.last
	if c != nil && !syncx.IsClosed(c.done) {
		h.mu.Unlock()
		select {
		case <-c.done:
			return c, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if c != nil && time.Since(c.started) < h.opts.CacheFor {
		h.mu.Unlock()
		return c, nil
	}
	c = &depthCall{done: make(chan struct{}), started: time.Now()}
	h.last = c
	h.mu.Unlock()

	// Closed on every way out of the reading (a panic in a Source's
	// Depth or Peek, which run on goroutines of their own, ends the
	// process instead), so that waiters are not left hanging.
	c.code, c.body = http.StatusServiceUnavailable, depthReport{Queue: h.name, Error: "the reading did not finish"}
	defer close(c.done)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.Timeout)
	defer cancel()
	c.code, c.body = h.read(rctx)
	return c, nil
}

// read asks every shard for its depth, and for the age of its front
// message, all in parallel, and sums the depths; any failure fails the
// whole reading.
func (h *DepthHandler) read(ctx context.Context) (int, depthReport) {
	rep := depthReport{Queue: h.name, Shards: make([]shardDepth, len(h.shards))}
	depthErrs := make([]error, len(h.shards))
	ageErrs := make([]error, len(h.shards))
	fronts := make([]azdispatch.Front, len(h.shards))
	var wg sync.WaitGroup
	paused := make([]azdispatch.PauseState, len(h.shards))
	for i, sh := range h.shards {
		rep.Shards[i] = shardDepth{Name: sh.name, Account: sh.account, Host: sh.host}
		wg.Go(func() {
			n, p, err := azdispatch.DepthAndPause(ctx, sh.src)
			paused[i] = p
			if err != nil {
				depthErrs[i] = err
				return
			}
			rep.Shards[i].Depth = &n
		})
		if h.opts.NoAge {
			continue
		}
		// Beside the depth rather than after it: the age adds a request,
		// not a round trip, to a reading.
		wg.Go(func() {
			fronts[i], ageErrs[i] = azdispatch.ReadFront(ctx, sh.src)
		})
	}
	wg.Wait()
	rep.At = time.Now().UTC()
	total, due, failed := 0, 0, 0
	var oldest time.Duration
	for i := range h.shards {
		if ageErrs[i] == nil && !h.opts.NoAge {
			rep.Shards[i].OldestAge = seconds(fronts[i].OldestAge)
		} else if ageErrs[i] != nil {
			ageErrs[i] = fmt.Errorf("oldest age: %w", ageErrs[i])
		}
		if err := errors.Join(depthErrs[i], ageErrs[i]); err != nil {
			failed++
			rep.Shards[i].Error = redactedError(err)
			continue
		}
		d := *rep.Shards[i].Depth
		if !h.opts.NoAge && !fronts[i].Full {
			// All it holds that is visible: the rest is sent for later
			// or in handlers.
			d = min(d, fronts[i].Visible)
		}
		rep.Shards[i].Due = &d
		total += *rep.Shards[i].Depth
		due += d
		oldest = max(oldest, fronts[i].OldestAge)
	}
	if failed > 0 {
		rep.Error = fmt.Sprintf("%d of %d shards could not be read; no partial sum is reported", failed, len(h.shards))
		h.opts.Logger.Warn("queue depth could not be read", "queue", h.name, "failed", failed, "shards", len(h.shards))
		return http.StatusServiceUnavailable, rep
	}
	rep.Depth, rep.Due = &total, &due
	if !h.opts.NoAge {
		rep.OldestAge = seconds(oldest)
	}
	switch p := lastPause(paused); {
	case !p.Until.IsZero():
		// Workers added now would only wait: the backlog stays until the
		// pause ends, and the depth says how much it is.
		rep.Paused = &pausedReport{Until: p.Until.UTC(), By: p.By}
		none := 0
		rep.DesiredWorkers = &none
	case h.opts.TargetWait > 0:
		n := desiredWorkers(due, oldest, h.opts.TargetWait, h.opts.WorkerRate)
		rep.DesiredWorkers = &n
	}
	return http.StatusOK, rep
}

// lastPause is the pause that ends last among the shards': a sharded
// queue is paused while any shard is.
func lastPause(ps []azdispatch.PauseState) azdispatch.PauseState {
	var last azdispatch.PauseState
	for _, p := range ps {
		if p.Until.After(last.Until) {
			last = p
		}
	}
	return last
}

// seconds is d in seconds, for the JSON.
func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// maxDesired bounds desired_workers: a tiny WorkerRate would otherwise
// ask for more than an int holds, and no autoscaler runs more replicas.
const maxDesired = math.MaxInt32

// desiredWorkers is how many workers, each handling rate messages a
// second, clear depth messages within target: ceil(depth / (rate ×
// target)), by Little's law (see [DepthHandler]). 0 for an empty queue,
// and at least 1 otherwise.
//
// When the front message has already waited longer than target (age; 0
// when not read), that answer came too late for it: the rule assumes the
// backlog has the whole target still ahead, and a late one has less, or
// none. So it is multiplied by age/target, and asks for at least one
// worker more than the rule, and more the later the backlog is. The factor stops at 2, because the age is one message's,
// and approximate: a message that keeps failing and coming back after its
// retry delays is old without the queue being slow, and should not drive
// the fleet to its maximum alone. It keeps no memory between readings,
// so it cannot wind up: once the backlog is served within the target, the
// factor is gone.
func desiredWorkers(depth int, age, target time.Duration, rate float64) int {
	if depth <= 0 {
		return 0
	}
	// Less a hair before rounding up: float arithmetic can make an exact
	// quotient (10 / (0.1 × 100)) a shade over a whole number, which
	// would ask for one worker too many.
	up := func(x float64) float64 { return math.Ceil(x - 1e-9) }
	rule := float64(depth) / (rate * target.Seconds())
	n := up(rule)
	if age > target {
		n = max(up(rule*min(age.Seconds()/target.Seconds(), 2)), n+1)
	}
	return int(min(max(n, 1), maxDesired))
}
