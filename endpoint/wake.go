package endpoint

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch/internal/redact"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// WakeHandler is an [http.Handler] that accepts wake-ups from other
// processes: a POST wakes the listeners that have it as their
// [azdispatch.ScalingOptions.Wake] (it is an [azdispatch.WakeSource]).
// Mount it wherever the process serves HTTP, behind whatever
// authentication the process uses: a wake-up carries nothing and costs only
// an early receive (the listener merges a storm of them into one receive
// per 20 ms), but an open endpoint lets anyone make a listener poll. A POST
// a browser makes from another origin is refused (see
// [http.CrossOriginProtection]), so that no web page can wake it. Publishers
// reach it with a [Notifier].
//
// A wake-up may name the queues sent to, as query parameters
// (POST /wake?queue=tenant-a&queue=tenant-b; at most [MaxWakeQueues],
// names the service would refuse left out): each is passed to the
// functions given to [WakeHandler.SubscribeQueue], such as a
// [azdispatch.QueueSet]'s Notify, which then reads that queue at once
// rather than after its rest. The zero value is ready.
type WakeHandler struct {
	subs   syncx.Subscribers
	origin http.CrossOriginProtection

	mu     sync.Mutex
	next   int
	queues map[int]func(queue string)
}

// MaxWakeQueues is the most queues one wake-up names.
const MaxWakeQueues = 64

// Subscribe implements [azdispatch.WakeSource].
func (h *WakeHandler) Subscribe(wake func()) (cancel func()) { return h.subs.Subscribe(wake) }

// SubscribeQueue registers wake, to be called (quickly, without blocking)
// with each queue a wake-up names; cancel removes it. [azdispatch.QueueSet]'s
// Notify fits it.
func (h *WakeHandler) SubscribeQueue(wake func(queue string)) (cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queues == nil {
		h.queues = map[int]func(string){}
	}
	id := h.next
	h.next++
	h.queues[id] = wake
	return func() {
		h.mu.Lock()
		delete(h.queues, id)
		h.mu.Unlock()
	}
}

// wakeQueues passes each of names to the queue subscribers.
func (h *WakeHandler) wakeQueues(names []string) {
	if len(names) == 0 {
		return
	}
	h.mu.Lock()
	fns := make([]func(string), 0, len(h.queues))
	for _, f := range h.queues {
		fns = append(fns, f)
	}
	h.mu.Unlock()
	for _, name := range names {
		for _, f := range fns {
			f(name)
		}
	}
}

// namedQueues are the queue names a wake-up carries that a queue may have:
// at most MaxWakeQueues, each 3 to 63 lowercase letters, digits and
// hyphens; anything else is left out, not refused, since the wake-up
// itself still stands.
func namedQueues(r *http.Request) []string {
	var out []string
	for _, name := range r.URL.Query()["queue"] {
		if len(out) == MaxWakeQueues {
			break
		}
		if validQueueName(name) {
			out = append(out, name)
		}
	}
	return out
}

// validQueueName reports whether name is made as the service's queue names
// are: 3 to 63 lowercase letters, digits and single inner hyphens.
func validQueueName(name string) bool {
	if len(name) < 3 || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' || strings.Contains(name, "--") {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ServeHTTP wakes the subscribed listeners on POST and answers 204; other
// methods get 405, and a cross-origin POST from a browser 403.
func (h *WakeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if err := h.origin.Check(r); err != nil {
		http.Error(w, "cross-origin wake-up refused", http.StatusForbidden)
		return
	}
	h.wakeQueues(namedQueues(r))
	h.subs.Wake()
	w.WriteHeader(http.StatusNoContent)
}

// Notifier sends wake-ups to a [WakeHandler] in another process.
// [Notifier.Notify] never blocks: wake-ups that come while one is being
// sent are merged into one more, so a publisher sending thousands of
// messages makes a handful of HTTP requests. [Notifier.Run] sends them;
// create one with [NewNotifier].
type Notifier struct {
	url     string
	client  *http.Client
	pending chan struct{} // holds at most one wake-up not yet sent

	mu    sync.Mutex
	names map[string]bool // queues the next wake-up names
	// OnError, if set, is called with each failed wake-up (for logs);
	// a failed wake-up is not retried: the listener's polling finds the work.
	OnError func(error)
}

// NewNotifier returns a notifier that POSTs to url with client (nil means a
// client with a 5 s timeout).
func NewNotifier(url string, client *http.Client) *Notifier {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return &Notifier{url: url, client: client, pending: make(chan struct{}, 1)}
}

// Notify asks for a wake-up to be sent. It fits
// [azdispatch.PublisherOptions.OnSent] through a closure, or call it after
// any send.
func (n *Notifier) Notify() {
	select {
	case n.pending <- struct{}{}:
	default: // one is pending already: it covers this one
	}
}

// NotifyQueue asks for a wake-up that names queue, so that a
// [azdispatch.QueueSet] behind the [WakeHandler] reads that queue at once.
// Names asked for while one is being sent go in the next.
func (n *Notifier) NotifyQueue(queue string) {
	n.mu.Lock()
	if n.names == nil {
		n.names = map[string]bool{}
	}
	n.names[queue] = true
	n.mu.Unlock()
	n.Notify()
}

// takeNames takes up to MaxWakeQueues of the names asked for, and asks for
// another wake-up for the rest.
func (n *Notifier) takeNames() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name := range n.names {
		if len(out) == MaxWakeQueues {
			n.Notify()
			break
		}
		out = append(out, name)
		delete(n.names, name)
	}
	return out
}

// Run sends wake-ups until ctx ends. It returns nil then.
func (n *Notifier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.pending:
			if err := n.post(ctx); err != nil && n.OnError != nil && ctx.Err() == nil {
				n.OnError(err)
			}
		}
	}
}

func (n *Notifier) post(ctx context.Context) error {
	target := n.url
	if names := n.takeNames(); len(names) > 0 {
		sort.Strings(names)
		q := url.Values{"queue": names}
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return fmt.Errorf("azdispatch: wake-up request: %w", redact.URLError(err))
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("azdispatch: wake-up: %w", redact.URLError(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("azdispatch: wake-up: %s", resp.Status)
	}
	return nil
}
