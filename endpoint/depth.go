package endpoint

import (
	"context"
	"fmt"
	"log/slog"
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
	// request per shard, and an autoscaler, its metrics server and a
	// dashboard may all poll the endpoint (KEDA polls every 30 s by default,
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
}

// DepthHandler is an [http.Handler] that serves the approximate depth of a
// queue, or of a whole sharded queue, as JSON for an autoscaler such as
// KEDA's metrics-api scaler (valueLocation "depth"):
//
//	{"queue":"orders","depth":123,"at":"2025-01-02T15:04:05.123Z","shards":[
//	  {"name":"orders-0","account":"acct1","depth":60},
//	  {"name":"orders-1","account":"acct2","depth":63}]}
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
// If any shard cannot be read, the answer is 503 with no "depth" at all, an
// "error", and each shard's own error in its entry. A partial sum would be
// a falsely low number, and an autoscaler that believes it scales in while
// work waits; a failed scrape is an error KEDA reports, and with a fallback
// in the ScaledObject it holds a set replica count instead.
//
// Readings are cached (see [DepthOptions.CacheFor]), failures too, so that a
// failing account is not asked more often than a healthy one. It serves GET
// and HEAD; other methods get 405. Mount it behind whatever authentication
// the process uses: the answer names queues and accounts, never a URL or
// credential.
type DepthHandler struct {
	name   string
	shards []depthShard
	opts   DepthOptions

	mu   sync.Mutex
	last *depthCall // the latest reading, finished or under way
}

// depthShard is one queue whose depth is read: a shard, or the source itself.
type depthShard struct {
	name, account string
	src           interface {
		Depth(ctx context.Context) (int, error)
	}
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
	Queue  string       `json:"queue"`
	Depth  *int         `json:"depth,omitempty"` // absent when a shard failed: no partial sum
	At     time.Time    `json:"at"`
	Error  string       `json:"error,omitempty"`
	Shards []shardDepth `json:"shards"`
}

type shardDepth struct {
	Name    string `json:"name"`
	Account string `json:"account,omitempty"`
	Depth   *int   `json:"depth,omitempty"`
	Error   string `json:"error,omitempty"`
}

// NewDepthHandler returns a handler serving src's depth: a
// *[azdispatch.Queue], a *[azdispatch.ShardedQueue] (every shard of it), or
// any [azdispatch.Source] (its Depth). Nil opts means defaults.
func NewDepthHandler(src azdispatch.Source, opts *DepthOptions) (*DepthHandler, error) {
	if src == nil {
		return nil, &azdispatch.ConfigError{Field: "source", Reason: "is nil"}
	}
	h := &DepthHandler{name: src.Name()}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Timeout < 0 {
		return nil, &azdispatch.ConfigError{Field: "DepthOptions.Timeout", Reason: "must not be negative"}
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
	if sq, ok := src.(*azdispatch.ShardedQueue); ok {
		for _, sh := range sq.Shards() {
			h.shards = append(h.shards, depthShard{name: sh.Name(), account: accountOf(sh), src: sh})
		}
	} else {
		h.shards = []depthShard{{name: src.Name(), account: accountOf(src), src: src}}
	}
	return h, nil
}

// accountOf names the account a queue of azdispatch lives in; empty for
// a queue opened by its own SAS URL and for sources of other kinds.
func accountOf(s azdispatch.Source) string {
	if q, ok := s.(*azdispatch.Queue); ok && q.Account() != nil {
		return q.Account().Name()
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

	// Closed even if a Source's Depth panics, so that waiters are not
	// left hanging; they then get a 503.
	c.code, c.body = http.StatusServiceUnavailable, depthReport{Queue: h.name, Error: "the reading did not finish"}
	defer close(c.done)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.Timeout)
	defer cancel()
	c.code, c.body = h.read(rctx)
	return c, nil
}

// read asks every shard for its depth in parallel and sums them; any
// failure fails the whole reading.
func (h *DepthHandler) read(ctx context.Context) (int, depthReport) {
	rep := depthReport{Queue: h.name, Shards: make([]shardDepth, len(h.shards))}
	errs := make([]error, len(h.shards))
	var wg sync.WaitGroup
	for i, sh := range h.shards {
		rep.Shards[i] = shardDepth{Name: sh.name, Account: sh.account}
		wg.Go(func() {
			n, err := sh.src.Depth(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			rep.Shards[i].Depth = &n
		})
	}
	wg.Wait()
	rep.At = time.Now().UTC()
	total, failed := 0, 0
	for i, err := range errs {
		if err != nil {
			failed++
			rep.Shards[i].Error = redactedError(err)
			continue
		}
		total += *rep.Shards[i].Depth
	}
	if failed > 0 {
		rep.Error = fmt.Sprintf("%d of %d shards could not be read; no partial sum is reported", failed, len(h.shards))
		h.opts.Logger.Warn("queue depth could not be read", "queue", h.name, "failed", failed, "shards", len(h.shards))
		return http.StatusServiceUnavailable, rep
	}
	rep.Depth = &total
	return http.StatusOK, rep
}
