package endpoint

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
// reach it with a [Notifier]. The zero value is ready.
type WakeHandler struct {
	subs   syncx.Subscribers
	origin http.CrossOriginProtection
}

// Subscribe implements [azdispatch.WakeSource].
func (h *WakeHandler) Subscribe(wake func()) (cancel func()) { return h.subs.Subscribe(wake) }

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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, nil)
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
