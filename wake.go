package azdispatch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// WakeSource tells its subscribers that work was sent. A *Queue is one: it
// calls them after every successful Send through it in this process. A
// WakeHandler is one for wake-ups from other processes.
type WakeSource interface {
	// Subscribe registers wake, to be called (quickly, without blocking)
	// whenever work is sent; cancel removes it.
	Subscribe(wake func()) (cancel func())
}

// WakeHandler is an http.Handler that accepts wake-ups from other processes:
// a POST wakes the listeners that have it as their ListenerOptions.Wake. Mount
// it wherever the process serves HTTP, behind whatever authentication the
// process uses; a wake-up carries nothing and costs only an early receive,
// but an open endpoint lets anyone make a listener poll. Publishers reach it
// with an HTTPNotifier. The zero value is ready.
type WakeHandler struct{ subs syncx.Subscribers }

// Subscribe implements WakeSource.
func (h *WakeHandler) Subscribe(wake func()) (cancel func()) { return h.subs.Subscribe(wake) }

// ServeHTTP wakes the subscribed listeners on POST and answers 204; other
// methods get 405.
func (h *WakeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	h.subs.Wake()
	w.WriteHeader(http.StatusNoContent)
}

// HTTPNotifier sends wake-ups to a WakeHandler in another process. Notify
// never blocks: wake-ups that come while one is being sent are merged into
// one more, so a publisher sending thousands of messages makes a handful of
// HTTP requests. Run sends them; create one with NewHTTPNotifier.
type HTTPNotifier struct {
	url     string
	client  *http.Client
	pending chan struct{} // holds at most one wake-up not yet sent
	// OnError, if set, is called with each failed wake-up (for logs);
	// a failed wake-up is not retried: the listener's polling finds the work.
	OnError func(error)
}

// NewHTTPNotifier returns a notifier that POSTs to url with client (nil means
// a client with a 5 s timeout).
func NewHTTPNotifier(url string, client *http.Client) *HTTPNotifier {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return &HTTPNotifier{url: url, client: client, pending: make(chan struct{}, 1)}
}

// Notify asks for a wake-up to be sent. It fits PublisherOptions.OnSent
// through a closure, or call it after any send.
func (n *HTTPNotifier) Notify() {
	select {
	case n.pending <- struct{}{}:
	default: // one is pending already: it covers this one
	}
}

// Run sends wake-ups until ctx ends. It returns nil then.
func (n *HTTPNotifier) Run(ctx context.Context) error {
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

func (n *HTTPNotifier) post(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, nil)
	if err != nil {
		return fmt.Errorf("azdispatch: wake-up request: %w", err)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("azdispatch: wake-up: %w", redactURLError(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("azdispatch: wake-up: %s", resp.Status)
	}
	return nil
}
