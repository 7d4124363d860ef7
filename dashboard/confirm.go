package dashboard

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/azdispatch/azdispatch"
)

// input is a field the operator fills in on a confirmation form (a pause's
// duration, who paused), beside the hidden fields that name what the action
// acts on. The server checks what comes back: the form only offers.
type input struct {
	Name, Label, Value string
	Options            []option // a choice among these; a text field when none
	Max                int      // a text field's bound, in bytes
}

// option is one choice of an input.
type option struct {
	Value, Label string
	Selected     bool
}

// confirmView is a confirmation page with what the action would touch, as
// the last reading saw it: an operator about to delete "every matching
// message" sees how many that is before the button.
type confirmView struct {
	confirmBody
	matching string
}

// Matching says how many messages (or blobs) the action would touch.
func (v confirmView) Matching() string { return v.matching }

// Matching is empty for a confirmation rendered without a count (the one
// an action posted without its confirmation gets): the page shows none.
func (confirmBody) Matching() string { return "" }

// serveConfirmPage is the confirmation page: what the action does, and how
// many messages it would touch by the last reading (a peek, which changes
// nothing, bounded like every reading).
func (h *Handler) serveConfirmPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	do := bounded(q.Get("do"), 20)
	b, ok := h.confirmation(do, q.Get)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "There is no such action, or it names nothing the dashboard shows.")
		return
	}
	b.Write = h.writable(r)
	v := confirmView{confirmBody: b}
	if b.Write {
		m, err := h.matching(r, do, q.Get)
		if err != nil {
			return // the viewer left
		}
		v.matching = m
	}
	h.render(w, r, http.StatusOK, "confirm", pageData{Title: "Confirm: " + b.Title, Write: b.Write, Body: v})
}

// matching counts what action do with the form's values would touch, by
// the shared reading of the poison queues (or of the payload store, for a
// sweep), and says it in a sentence; for a pause, a resume or a run now,
// what the last reading found of the queue's or the schedule's state. It
// fails only when the viewer left.
func (h *Handler) matching(r *http.Request, do string, get func(string) string) (string, error) {
	switch do {
	case "pause", "resume":
		return h.pauseNow(r, get)
	case "schedule-pause", "schedule-resume", "schedule-run":
		return h.scheduleNow(r, get)
	}
	if do == "sweep" {
		rd, _, err := h.payloads.get(r.Context())
		switch {
		case err != nil:
			return "", err
		case rd.Err != "":
			return "The blobs to remove could not be counted: " + rd.Err + ".", nil
		}
		return fmt.Sprintf("%s would be removed, by the last listing.", plural(rd.Res.Deleted, "payload blob", "payload blobs")), nil
	}
	rd, _, err := h.poison.get(r.Context())
	if err != nil {
		return "", err
	}
	unread := ""
	if len(rd.Errors) > 0 {
		unread = " Not every poison queue could be read (" + strings.Join(rd.Errors, "; ") + "): there may be more."
	}
	now := h.opts.Now()
	switch do {
	case "requeue", "purge":
		t := readTarget(get)
		for _, e := range rd.Entries {
			if e.PoisonQueue == t.PoisonQueue && t.match(e.Env) {
				return "1 message matches: this one, seen by the last peek." + unread, nil
			}
		}
		return "The last peek did not see this message (it may be further back, or handled since): the action looks for it, and changes nothing if it is gone." + unread, nil
	}
	f := readFilter(get)
	n := 0
	for _, e := range rd.Entries {
		if f.match(e.Env, now) {
			n++
		}
	}
	if len(rd.Full) > 0 {
		return fmt.Sprintf("At least %s: the last peek saw only the first %d of each poison queue, and %s held more.",
			plural(n, "message matches", "messages match"), azdispatch.MaxBatch, strings.Join(rd.Full, ", ")) + unread, nil
	}
	if n == 0 {
		return "No message matches, by the last peek: the action would change nothing." + unread, nil
	}
	return plural(n, "message matches", "messages match") + ", by the last peek." + unread, nil
}

// plural is n with the singular or plural words.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
