package dashboard

import (
	"context"
	"errors"
	"net/http"

	"github.com/azdispatch/azdispatch"
)

// statusBody is the status page: a lookup of a group by its ID or of a
// tracked message by its status token, and what was found.
type statusBody struct {
	Store bool   // the sources have a payload store, where statuses are kept
	Group string // as asked
	Token string
	Err   string // why nothing is shown
	G     *azdispatch.GroupStatus
	M     *azdispatch.MessageStatus
}

// serveStatus shows a group's progress or a tracked message's status, read
// at each request (one blob read; a group's, one more per 64 children
// beyond the first 64): it is asked for one ID at a time, so no reading
// is shared. It changes nothing.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	b := statusBody{Store: h.topo.store != nil, Group: q.Get("group"), Token: q.Get("token")}
	code := http.StatusOK
	switch {
	case !b.Store || b.Group == "" && b.Token == "":
	case b.Group != "" && b.Token != "":
		code, b.Err = http.StatusBadRequest, "Ask for a group or a message, not both."
	case b.Group != "":
		ctx, cancel := withReadDeadline(r.Context())
		st, err := h.topo.store.GroupStatus(ctx, b.Group)
		cancel()
		if err == nil {
			b.G = &st
		}
		code, b.Err = statusError(ctx, err, azdispatch.ErrGroupNotFound, "No group "+b.Group+".")
	default:
		ctx, cancel := withReadDeadline(r.Context())
		st, err := h.topo.store.MessageStatus(ctx, b.Token)
		cancel()
		if err == nil {
			b.M = &st
		}
		code, b.Err = statusError(ctx, err, azdispatch.ErrStatusNotFound, "No tracked message with that token.")
	}
	h.render(w, r, code, "status", pageData{Title: "Status", Nav: "status", Write: h.writable(r), Body: b})
}

// statusError is the answer's code and line for a lookup's error: 404 for
// notFound (an ID or token that cannot be one is none), 503 for a store
// that failed or did not answer in time.
func statusError(ctx context.Context, err, notFound error, missing string) (int, string) {
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.Is(err, notFound):
		return http.StatusNotFound, missing
	}
	return http.StatusServiceUnavailable, "Not read: " + readError(ctx, err)
}
