package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// actionTimeout bounds an action that runs within its request.
const actionTimeout = 2 * time.Minute

// maxTestText bounds a test message's text: what a queue message holds.
const maxTestText = azdispatch.MaxMessageSize

// notices are the lines an action's redirect may ask a page to show: a
// fixed set, so that nothing a client writes in a URL appears as the
// dashboard's own words.
var notices = map[string]string{
	"requeued":     "The message was requeued: it is back in its queue.",
	"purged":       "The message was deleted from its poison queue.",
	"not-found":    "That message was not found in its poison queue any more (handled by someone else?): nothing changed.",
	"sent":         "The test message was sent: the listener's handler will process it like any other message.",
	"job-started":  "The job has started; its progress shows below.",
	"job-busy":     "Another job is running: wait for it to end.",
	"read-only":    "This dashboard is read-only: nothing was changed.",
	"failed":       "The action failed; nothing more was changed. The log says why.",
	"sweep-queued": "The sweep has started.",
	"paused":       "The pause is written: the queue's listeners, in every process, receive nothing until it ends or is resumed (each notices within its scale interval).",
	"resumed":      "The pause is ended: the queue's listeners receive again (each notices within its scale interval).",
	"schedule-paused": "The schedule is paused: no scheduler sends its occurrences until the pause ends or is resumed " +
		"(each notices within its watch period).",
	"schedule-resumed": "The schedule's pause is ended: its misfire policy says which of the occurrences it held are sent " +
		"(each scheduler notices within its watch period).",
	"schedule-run": "A run now is asked: the first scheduler to read the schedule sends one occurrence, once across every instance " +
		"(within its watch period).",
}

func notice(r *http.Request) string { return notices[bounded(r.URL.Query().Get("done"), 20)] }

// action is one kind of action: what its confirmation asks, and whether it
// needs one.
type action struct {
	title, button string
	destructive   bool
}

var actions = map[string]action{
	"requeue":         {"Requeue one message", "Requeue", true},
	"purge":           {"Delete one poison message", "Delete for good", true},
	"requeue-all":     {"Requeue every matching message", "Requeue all matching", true},
	"purge-all":       {"Delete every matching poison message", "Delete all matching for good", true},
	"sweep":           {"Run a sweep", "Sweep", true},
	"send":            {"Send a test message", "Send", false},
	"pause":           {"Pause a queue", "Pause", true},
	"resume":          {"Resume a queue", "Resume", true},
	"schedule-pause":  {"Pause a schedule", "Pause", true},
	"schedule-resume": {"Resume a schedule", "Resume", true},
	"schedule-run":    {"Run a schedule now", "Run now", true},
}

// target names one poison envelope, as a form carries it.
type target struct {
	PoisonQueue, ID, Batch string
	Item                   int
}

func readTarget(get func(string) string) target {
	t := target{PoisonQueue: bounded(get("pq"), 100), ID: bounded(get("id"), 100), Batch: bounded(get("batch"), 100)}
	t.Item, _ = strconv.Atoi(bounded(get("item"), 10))
	return t
}

func (t target) match(e *azdispatch.PoisonEnvelope) bool {
	return e != nil && e.MessageID == t.ID && e.Batch == t.Batch && e.Item == t.Item
}

// hidden is one hidden field of a confirmation form.
type hidden struct{ Name, Value string }

type confirmBody struct {
	Do, Title, Question, Button string
	Fields                      []hidden
	Inputs                      []input // what the operator chooses (a pause's duration)
	Cancel                      string
	Write                       bool
}

// confirmation describes what an action would do, for its confirmation
// page.
func (h *Handler) confirmation(do string, get func(string) string) (confirmBody, bool) {
	a, ok := actions[do]
	if !ok || !a.destructive {
		return confirmBody{}, false
	}
	b := confirmBody{Do: do, Title: a.title, Button: a.button, Cancel: "poison"}
	switch do {
	case "requeue", "purge":
		t := readTarget(get)
		u := h.topo.unitByPoison(t.PoisonQueue)
		if u == nil || t.ID == "" {
			return b, false
		}
		what := "message " + t.ID
		if t.Batch != "" {
			what = fmt.Sprintf("item %d of batch %s (message %s)", t.Item, t.Batch, t.ID)
		}
		if do == "requeue" {
			b.Question = fmt.Sprintf("Send %s from %s back to %s with its original text, and delete it from the poison queue?", what, t.PoisonQueue, u.name)
		} else {
			b.Question = fmt.Sprintf("Delete %s from %s for good? It cannot be brought back.", what, t.PoisonQueue)
		}
		b.Fields = []hidden{{"pq", t.PoisonQueue}, {"id", t.ID}, {"batch", t.Batch}, {"item", strconv.Itoa(t.Item)}}
	case "requeue-all", "purge-all":
		f := readFilter(get)
		verb := "Send %s back to its queue, and delete it from the poison queues?"
		if do == "purge-all" {
			verb = "Delete %s from the poison queues for good? They cannot be brought back."
		}
		b.Question = fmt.Sprintf(verb, f.describe()) + " This runs as a job in the background, over the whole poison queues, not only the first 32 the list shows."
		for _, k := range []string{"reason", "source", "older"} {
			b.Fields = append(b.Fields, hidden{k, f.values()[k]})
		}
		q := url.Values{}
		for k, v := range f.values() {
			if v != "" {
				q.Set(k, v)
			}
		}
		b.Cancel = "poison?" + q.Encode()
	case "pause", "resume":
		return h.pauseConfirmation(b, do, get)
	case "schedule-pause", "schedule-resume", "schedule-run":
		return h.scheduleConfirmation(b, do, get)
	case "sweep":
		if h.topo.store == nil {
			return b, false
		}
		b.Question = fmt.Sprintf("Delete the payload blobs in %s that no message can point at any more (what the dry run counts as to be removed)?", h.topo.store.Container())
		b.Cancel = "payloads"
	}
	return b, true
}

// serveAct takes an action. It is the one handler that changes anything,
// and only on a POST that passed the cross-origin check, from a request
// allowed to write, with a confirmation for anything destructive.
func (h *Handler) serveAct(w http.ResponseWriter, r *http.Request) {
	if !h.writable(r) {
		h.fail(w, r, http.StatusForbidden, "Refused: this dashboard is read-only.")
		return
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.fail(w, r, http.StatusRequestEntityTooLarge, "Refused: the form is too large.")
			return
		}
		h.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	get := r.PostForm.Get
	do := bounded(get("do"), 20)
	a, ok := actions[do]
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "There is no such action.")
		return
	}
	if a.destructive && get("confirm") != "yes" {
		b, ok := h.confirmation(do, get)
		if !ok {
			h.fail(w, r, http.StatusBadRequest, "The action names nothing the dashboard shows.")
			return
		}
		b.Write = true
		h.render(w, r, http.StatusOK, "confirm", pageData{Title: "Confirm: " + b.Title, Write: true, Body: b})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	log := h.opts.Logger.With("action", do)
	switch do {
	case "requeue", "purge":
		h.actOne(ctx, w, r, do, readTarget(get))
	case "requeue-all", "purge-all":
		h.actAll(w, r, do, readFilter(get))
	case "sweep":
		h.actSweep(w, r)
	case "pause":
		h.actPause(ctx, w, r, get)
	case "resume":
		h.actResume(ctx, w, r, get)
	case "schedule-pause", "schedule-resume", "schedule-run":
		h.actSchedule(ctx, w, r, do, get)
	case "send":
		name := bounded(get("queue"), 100)
		text := get("text")
		var src azdispatch.Target
		found := false
		for _, s := range h.topo.sets {
			if s.name == name {
				found = true
				src, _ = s.source.(azdispatch.Target)
			}
		}
		switch {
		case !found:
			h.fail(w, r, http.StatusBadRequest, "There is no such queue.")
			return
		case src == nil:
			h.fail(w, r, http.StatusBadRequest, "This source takes no sends: it is a set of queues, each with its own messages. Send to one of its queues.")
			return
		case strings.TrimSpace(text) == "":
			// No default: a made-up body can decode as a real message,
			// and a real handler would act on it.
			h.fail(w, r, http.StatusBadRequest, "Refused: the test message is empty, and there is no default. "+
				"Write the message the listener's handler should receive: it will process it like any other message.")
			return
		case len(text) > maxTestText:
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Refused: a test message holds at most %d bytes.", maxTestText))
			return
		case xmltext.Check(text) != nil:
			// Refused here, before storage would refuse it.
			h.fail(w, r, http.StatusBadRequest, "A test message's text must be valid UTF-8 without control characters such as NUL (tab and line breaks are fine): a queue message cannot carry them.")
			return
		}
		id, err := src.Send(ctx, text, nil)
		if err != nil {
			log.Error("dashboard: test send failed", "queue", name, "err", err)
			h.fail(w, r, http.StatusBadGateway, "The send failed: "+cleanError(err))
			return
		}
		log.Info("dashboard: test message sent", "queue", name, "id", id)
		h.overview.invalidate()
		seeOther(w, "./?done=sent")
	}
}

// actOne requeues or purges one envelope, within the request.
func (h *Handler) actOne(ctx context.Context, w http.ResponseWriter, r *http.Request, do string, t target) {
	u := h.topo.unitByPoison(t.PoisonQueue)
	if u == nil || t.ID == "" {
		h.fail(w, r, http.StatusBadRequest, "There is no such poison queue.")
		return
	}
	log := h.opts.Logger.With("action", do, "poison_queue", t.PoisonQueue, "id", t.ID, "batch", t.Batch, "item", t.Item)
	var n int
	var err error
	if do == "requeue" {
		var res azdispatch.RequeueResult
		res, err = azdispatch.Requeue(ctx, u.poison, u.queue, &azdispatch.RequeueOptions{Max: 1, Filter: t.match})
		n = res.Moved
	} else {
		n, err = purge(ctx, u.poison, t.match, 1, nil)
	}
	h.poison.invalidate()
	h.overview.invalidate()
	switch {
	case err != nil && n == 0:
		log.Error("dashboard: action failed", "err", err)
		h.fail(w, r, http.StatusBadGateway, "The action failed: "+cleanError(err))
		return
	case err != nil:
		log.Warn("dashboard: action done, with an error after it", "err", err)
	case n == 0:
		seeOther(w, "poison?done=not-found")
		return
	}
	log.Info("dashboard: action done")
	done := "requeued"
	if do == "purge" {
		done = "purged"
	}
	seeOther(w, "poison?done="+done)
}

// actAll starts a job that requeues or purges every envelope f picks, in
// every poison queue, and sends the viewer to its progress.
func (h *Handler) actAll(w http.ResponseWriter, r *http.Request, do string, f poisonFilter) {
	total := 0
	if rd, _, err := h.poison.get(r.Context()); err == nil && len(rd.Full) == 0 {
		now := h.opts.Now()
		for _, e := range rd.Entries {
			if f.match(e.Env, now) {
				total++
			}
		}
	}
	units := h.topo.units
	what := "requeue " + f.describe()
	if do == "purge-all" {
		what = "delete " + f.describe()
	}
	id, err := h.jobs.start(what, total, func(ctx context.Context, p progress) (string, error) {
		defer h.poison.invalidate()
		defer h.overview.invalidate()
		var done atomic.Int64
		var errs []error
		match := func(e *azdispatch.PoisonEnvelope) bool { return f.match(e, h.opts.Now()) }
		for _, u := range units {
			if u.poison == nil {
				continue
			}
			var err error
			if do == "requeue-all" {
				_, err = azdispatch.Requeue(ctx, u.poison, u.queue, &azdispatch.RequeueOptions{Filter: func(e *azdispatch.PoisonEnvelope) bool {
					ok := match(e)
					if ok {
						// Picked: moved next (or its failure ends the job).
						p(int(done.Add(1)), 0)
					}
					return ok
				}})
			} else {
				_, err = purge(ctx, u.poison, match, 0, func() { p(int(done.Add(1)), 0) })
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", u.poison.Name(), err))
				if ctx.Err() != nil {
					break
				}
			}
		}
		verb := "requeued"
		if do == "purge-all" {
			verb = "deleted"
		}
		return fmt.Sprintf("%d %s", done.Load(), verb), errors.Join(errs...)
	})
	h.jobStarted(w, r, id, err)
}

// actSweep starts a sweep of the payload store as a job.
func (h *Handler) actSweep(w http.ResponseWriter, r *http.Request) {
	store := h.topo.store
	if store == nil {
		h.fail(w, r, http.StatusBadRequest, "There is no payload store to sweep.")
		return
	}
	id, err := h.jobs.start("sweep "+store.Container(), 0, func(ctx context.Context, p progress) (string, error) {
		defer h.payloads.invalidate()
		res, err := azdispatch.Sweep(ctx, store, nil)
		p(res.Deleted, 0)
		return fmt.Sprintf("%d scanned, %d deleted, %d live, %d held by poison envelopes, %d not ours", res.Scanned, res.Deleted, res.Live, res.Poisoned, res.Foreign), err
	})
	h.jobStarted(w, r, id, err)
}

// jobStarted answers a request that started job id (err: why it did not):
// to the jobs page, or an error page.
func (h *Handler) jobStarted(w http.ResponseWriter, r *http.Request, id int, err error) {
	switch {
	case errors.Is(err, errBusy):
		seeOther(w, "jobs?done=job-busy&id="+strconv.Itoa(id))
	case err != nil:
		h.fail(w, r, http.StatusServiceUnavailable, "The job could not start: "+err.Error())
	default:
		seeOther(w, "jobs?done=job-started&id="+strconv.Itoa(id))
	}
}

// seeOther sends the browser to loc, relative to the action's URL (so
// under the prefix the dashboard is mounted at): http.Redirect would
// resolve it against the path the handler sees, which has lost the prefix.
func seeOther(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}
