package endpoint

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/track"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// StatusOptions configures a [StatusHandler]. Nil, or a zero field, means
// the documented default.
type StatusOptions struct {
	// RetryAfter is what a 202 answer tells a client to wait before it
	// asks again. Defaults to 5 s.
	RetryAfter time.Duration
	// Timeout bounds one reading of a status. Defaults to 10 s.
	Timeout time.Duration
	// ResultURL, if set, is where the result of a group or message that
	// succeeded is: its answer is then 303 See Other with that Location,
	// as the pattern has it, rather than 200 with the status. It is given
	// "groups" or "messages", and the ID or token. An empty URL is 200.
	ResultURL func(kind, id string) string
}

// StatusHandler answers what became of a group of messages (see
// [azdispatch.PayloadStore.StartGroup]) or of a tracked message (see
// [azdispatch.SendOptions.Track]) in the manner of the Asynchronous
// Request-Reply pattern:
//
//   - GET <prefix>/groups/<id> and GET <prefix>/messages/<token> are 202
//     Accepted with a Retry-After header while the group is not complete,
//     or the message has not ended, and 200 OK (or 303 See Other, see
//     [StatusOptions.ResultURL]) once it has; each carries the status as
//     JSON: a group's children succeeded, failed with the first reasons,
//     and pending, and its outcome once complete; a message's state
//     (pending, delivered, failed, succeeded, poisoned, cancelled), tries
//     and last reason.
//   - An unknown group or token is 404; an ID or token that could name
//     another blob, or another path, 400; a write, 405.
//
// Mount it under a prefix that ends in "/", where only those allowed to
// see the statuses reach it: it does not authenticate (a status token is
// random, and gives no power over its message). Each answer reads the
// store: a message's status is one blob read; a group's, one, and one per
// 64 children beyond the first 64.
type StatusHandler struct {
	store *azdispatch.PayloadStore
	opts  StatusOptions
}

// NewStatusHandler returns the handler of the groups and tracked messages
// kept in store.
func NewStatusHandler(store *azdispatch.PayloadStore, opts *StatusOptions) (*StatusHandler, error) {
	if store == nil {
		return nil, &azdispatch.ConfigError{Field: "store", Reason: "nil"}
	}
	var o StatusOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.RetryAfter < 0 || o.Timeout < 0:
		return nil, &azdispatch.ConfigError{Field: "StatusOptions", Reason: "negative RetryAfter or Timeout"}
	case o.RetryAfter == 0:
		o.RetryAfter = 5 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return &StatusHandler{store: store, opts: o}, nil
}

// groupReport is a group's progress as the handler shows it.
type groupReport struct {
	ID        string         `json:"id"`
	Status    string         `json:"status"` // "running", "succeeded" or "failed"
	Size      int            `json:"size"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Pending   int            `json:"pending"`
	Failures  []groupFailure `json:"failures"`
}

type groupFailure struct {
	Child  int    `json:"child"`
	Reason string `json:"reason"`
}

// messageReport is a tracked message's status as the handler shows it.
type messageReport struct {
	Token     string    `json:"token"`
	Status    string    `json:"status"` // the state
	Queue     string    `json:"queue"`
	MessageID string    `json:"messageId,omitempty"`
	Tries     int       `json:"tries"`
	Reason    string    `json:"reason,omitempty"`
	Updated   time.Time `json:"updated"`
}

// ServeHTTP implements [http.Handler].
func (h *StatusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The escaped path: an encoded "/" stays in the ID, which refuses it,
	// rather than splitting it.
	parts := strings.Split(r.URL.EscapedPath(), "/")
	if len(parts) < 2 {
		http.Error(w, "ask for <prefix>/groups/<id> or <prefix>/messages/<token>", http.StatusBadRequest)
		return
	}
	kind, id := parts[len(parts)-2], parts[len(parts)-1]
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	switch kind {
	case "groups":
		h.serveGroup(ctx, w, r, id)
	case "messages":
		h.serveMessage(ctx, w, r, id)
	default:
		http.Error(w, "ask for <prefix>/groups/<id> or <prefix>/messages/<token>", http.StatusBadRequest)
	}
}

func (h *StatusHandler) serveGroup(ctx context.Context, w http.ResponseWriter, r *http.Request, id string) {
	if !validGroupID(id) {
		http.Error(w, "a group ID has 1 to 128 letters, digits, '-', '_' and '.'", http.StatusBadRequest)
		return
	}
	st, err := h.store.GroupStatus(ctx, id)
	switch {
	case errors.Is(err, azdispatch.ErrGroupNotFound):
		http.Error(w, "no group "+id, http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, redactedError(err), http.StatusServiceUnavailable)
		return
	}
	rep := groupReport{ID: st.ID, Status: "running", Size: st.Size, Succeeded: st.Succeeded, Failed: st.Failed,
		Pending: st.Pending, Failures: []groupFailure{}}
	for _, f := range st.Failures {
		rep.Failures = append(rep.Failures, groupFailure{Child: f.Child, Reason: xmltext.TruncateUTF8(f.Reason, maxReason)})
	}
	if st.Complete {
		rep.Status = st.Outcome
	}
	h.answer(w, r, st.Complete, st.Outcome == "succeeded", "groups", id, rep)
}

func (h *StatusHandler) serveMessage(ctx context.Context, w http.ResponseWriter, r *http.Request, token string) {
	if !validToken(token) {
		http.Error(w, "a status token is 32 lowercase hexadecimal digits", http.StatusBadRequest)
		return
	}
	st, err := h.store.MessageStatus(ctx, token)
	switch {
	case errors.Is(err, azdispatch.ErrStatusNotFound):
		http.Error(w, "no tracked message "+token, http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, redactedError(err), http.StatusServiceUnavailable)
		return
	}
	rep := messageReport{Token: token, Status: st.State, Queue: st.Queue, MessageID: st.MessageID, Tries: st.Tries,
		Reason: xmltext.TruncateUTF8(st.Reason, maxReason), Updated: st.Updated.UTC()}
	h.answer(w, r, st.Final, st.State == "succeeded", "messages", token, rep)
}

// answer writes a status: 202 with Retry-After while not done, then 200,
// or 303 to the result of a success if the options say where it is.
func (h *StatusHandler) answer(w http.ResponseWriter, r *http.Request, done, succeeded bool, kind, id string, rep any) {
	if !done {
		w.Header().Set("Retry-After", strconv.Itoa(int((h.opts.RetryAfter+time.Second-1)/time.Second)))
		writeJSON(w, r, http.StatusAccepted, rep)
		return
	}
	if succeeded && h.opts.ResultURL != nil {
		if loc := h.opts.ResultURL(kind, id); loc != "" {
			w.Header().Set("Location", loc)
			writeJSON(w, r, http.StatusSeeOther, rep)
			return
		}
	}
	writeJSON(w, r, http.StatusOK, rep)
}

// validToken reports whether token can be a status token, so that no
// other blob is read for it.
func validToken(token string) bool { return track.ValidToken(token) }

// validGroupID reports whether id can name a group, so that no other
// blob is read for it.
func validGroupID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return strings.Trim(id, ".") != ""
}
