package endpoint

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// GroupStatusOptions configures a [GroupStatusHandler]. Nil, or a zero
// field, means the documented default.
type GroupStatusOptions struct {
	// RetryAfter is what a 202 answer tells a client to wait before it
	// asks again. Defaults to 5 s.
	RetryAfter time.Duration
	// Timeout bounds one reading of a group. Defaults to 10 s.
	Timeout time.Duration
}

// GroupStatusHandler answers what became of a group of messages (see
// [azdispatch.PayloadStore.StartGroup]) in the manner of the Asynchronous
// Request-Reply pattern: GET <prefix>/<id> is 202 Accepted with a
// Retry-After header while the group is not complete, and 200 OK once it
// is; both carry the group's progress as JSON (children succeeded, failed
// with the first reasons, and pending; the outcome once complete). An
// unknown group is 404, a malformed ID 400. Mount it under a prefix that
// ends in "/" (the ID is what follows the last "/"), where only those
// allowed to see the groups reach it: it does not authenticate. Each
// answer reads the group: one blob read, and one per 64 children beyond the
// first 64.
type GroupStatusHandler struct {
	store *azdispatch.PayloadStore
	opts  GroupStatusOptions
}

// NewGroupStatusHandler returns the handler of the groups kept in store.
func NewGroupStatusHandler(store *azdispatch.PayloadStore, opts *GroupStatusOptions) (*GroupStatusHandler, error) {
	if store == nil {
		return nil, &azdispatch.ConfigError{Field: "store", Reason: "nil"}
	}
	var o GroupStatusOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.RetryAfter < 0 || o.Timeout < 0:
		return nil, &azdispatch.ConfigError{Field: "GroupStatusOptions", Reason: "negative RetryAfter or Timeout"}
	case o.RetryAfter == 0:
		o.RetryAfter = 5 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return &GroupStatusHandler{store: store, opts: o}, nil
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

// ServeHTTP implements [http.Handler].
func (h *GroupStatusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The escaped path: an encoded "/" stays in the ID, which refuses it,
	// rather than splitting it.
	path := r.URL.EscapedPath()
	id := path[strings.LastIndexByte(path, '/')+1:]
	if !validGroupID(id) {
		http.Error(w, "a group ID has 1 to 128 letters, digits, '-', '_' and '.'", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
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
	if !st.Complete {
		w.Header().Set("Retry-After", strconv.Itoa(int((h.opts.RetryAfter+time.Second-1)/time.Second)))
		writeJSON(w, r, http.StatusAccepted, rep)
		return
	}
	rep.Status = st.Outcome
	writeJSON(w, r, http.StatusOK, rep)
}

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
