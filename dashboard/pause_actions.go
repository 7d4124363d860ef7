package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/pause"
)

// An operator pauses a queue when what its handlers call is down, and
// resumes it when that is back (see [azdispatch.Pauser]): both go through
// the confirmation page as every other action does, and the overview shows
// the pause (who, until when) to everyone who looks.

// pauseTarget is what a pause or resume acts on: a source the dashboard
// was given that can be paused (a queue; a sharded set, every shard as
// one), or a queue of a queue set, whose listeners go on with the set's
// other queues while it is paused. A shard of a sharded set is not one:
// paused alone, it would hold every listener of its set.
type pauseTarget struct {
	name  string
	what  string // "queue orders", "sharded set jobs (every one of its 2 shards)"
	p     azdispatch.Pauser
	units []*unit // the queues whose readings show its pause
}

// pauseTargets finds the targets among the sets, by name; a name met twice
// (a queue given alone and in a queue set) is the same queue, kept once.
func pauseTargets(sets []*set) map[string]*pauseTarget {
	out := map[string]*pauseTarget{}
	add := func(t *pauseTarget) {
		if _, seen := out[t.name]; !seen {
			out[t.name] = t
		}
	}
	for _, s := range sets {
		switch {
		case s.caps.Pauser != nil && s.isSharded():
			add(&pauseTarget{name: s.name, p: s.caps.Pauser, units: s.units,
				what: fmt.Sprintf("sharded set %s (every one of its %d shards)", s.name, len(s.units))})
		case s.caps.Pauser != nil:
			add(&pauseTarget{name: s.name, p: s.caps.Pauser, units: s.units, what: "queue " + s.name})
		}
		if s.shares == nil {
			continue
		}
		for _, u := range s.units {
			if u.caps.Pauser != nil {
				add(&pauseTarget{name: u.name, p: u.caps.Pauser, units: []*unit{u},
					what: fmt.Sprintf("queue %s of queue set %s", u.name, s.name)})
			}
		}
	}
	return out
}

// pauseDuration is one of the durations a pause may be given: a fixed
// few, so that a mistyped "24" is not 24 ns, nor "1000h" six weeks.
type pauseDuration struct {
	value, label string
	d            time.Duration
}

var pauseDurations = []pauseDuration{
	{"15m", "15 minutes", 15 * time.Minute},
	{"1h", "1 hour", time.Hour},
	{"4h", "4 hours", 4 * time.Hour},
	{"24h", "24 hours", 24 * time.Hour},
}

// defaultPauseDuration is the duration the form starts on: long enough to
// look into an outage, short enough that a forgotten pause ends the same
// working day.
const defaultPauseDuration = "1h"

// defaultPausedBy is who paused, when the operator does not say.
const defaultPausedBy = "dashboard"

// pauseFor reads a pause's duration from a form: one of pauseDurations.
func pauseFor(value string) (time.Duration, bool) {
	for _, p := range pauseDurations {
		if p.value == value {
			return p.d, true
		}
	}
	return 0, false
}

// pausedBy reads who paused from a form: trimmed, defaultPausedBy when
// empty. refused says why it is not taken, in the page's words: longer
// than a queue keeps, or not one line of text (it is shown on every page
// and in the listeners' logs).
func pausedBy(value string) (by, refused string) {
	by = strings.TrimSpace(value)
	switch {
	case by == "":
		return defaultPausedBy, ""
	case len(by) > pause.MaxBy:
		return "", fmt.Sprintf("Refused: “paused by” holds at most %d bytes (this one has %d): a queue keeps no more.", pause.MaxBy, len(by))
	case !utf8.ValidString(by) || strings.ContainsFunc(by, unicode.IsControl):
		return "", "Refused: “paused by” must be one line of text, without control characters."
	}
	return by, ""
}

// readPause reads a pause's duration and who paused from a form; refused
// says why they are not taken, and that nothing was paused.
func readPause(get func(string) string) (d time.Duration, by, refused string) {
	d, ok := pauseFor(get("duration"))
	if !ok {
		return 0, "", "Refused: a pause lasts one of " + pauseDurationLabels() + ". Nothing was paused."
	}
	if by, refused = pausedBy(get("by")); refused != "" {
		return 0, "", refused + " Nothing was paused."
	}
	return d, by, ""
}

// pauseDurationLabels lists the durations a pause may be given, in words.
func pauseDurationLabels() string {
	labels := make([]string, len(pauseDurations))
	for i, p := range pauseDurations {
		labels[i] = p.label
	}
	return strings.Join(labels, ", ")
}

// pauseInputs are the fields a pause's confirmation asks for, filled with
// what get already holds (a form posted without its confirmation).
func pauseInputs(get func(string) string) []input {
	chosen := get("duration")
	if _, ok := pauseFor(chosen); !ok {
		chosen = defaultPauseDuration
	}
	d := input{Name: "duration", Label: "For"}
	for _, p := range pauseDurations {
		d.Options = append(d.Options, option{Value: p.value, Label: p.label, Selected: p.value == chosen})
	}
	by := bounded(strings.TrimSpace(get("by")), pause.MaxBy)
	if by == "" {
		by = defaultPausedBy
	}
	return []input{d, {Name: "by", Label: "Paused by (who, and why)", Value: by, Max: pause.MaxBy}}
}

// pauseConfirmation describes a pause or resume of the target get names.
func (h *Handler) pauseConfirmation(b confirmBody, do string, get func(string) string) (confirmBody, bool) {
	t := h.topo.pausable[bounded(get("queue"), 100)]
	if t == nil {
		return b, false
	}
	b.Cancel = "./"
	b.Fields = []hidden{{"queue", t.name}}
	if do == "resume" {
		b.Question = fmt.Sprintf("End the pause of %s now? Its listeners, in every process, receive again: each notices within its scale interval (10 s by default).", t.what)
		return b, true
	}
	b.Question = fmt.Sprintf("Pause %s? Its listeners, in every process, receive nothing until the pause ends or is resumed: "+
		"handlers under way finish, and messages sent meanwhile wait in the queue. Each listener notices within its scale interval (10 s by default). "+
		"A pause given while one holds replaces it.", t.what)
	b.Inputs = pauseInputs(get)
	return b, true
}

// pauseNow says what the last reading found of the target's pause, for
// its confirmation page; it fails only when the viewer left.
func (h *Handler) pauseNow(r *http.Request, get func(string) string) (string, error) {
	t := h.topo.pausable[bounded(get("queue"), 100)]
	if t == nil {
		return "", nil
	}
	rd, _, err := h.overview.get(r.Context())
	if err != nil {
		return "", err
	}
	c := pauseWords(rd, t.units, false)
	if c.Words == "—" {
		return "Whether it is paused now could not be read (" + c.Title + ").", nil
	}
	return "By the last reading: " + c.Words + ".", nil
}

// actPause pauses the target the form names, for the duration it chose.
func (h *Handler) actPause(ctx context.Context, w http.ResponseWriter, r *http.Request, get func(string) string) {
	t := h.topo.pausable[bounded(get("queue"), 100)]
	if t == nil {
		h.fail(w, r, http.StatusBadRequest, "There is no such queue, or it cannot be paused.")
		return
	}
	d, by, refused := readPause(get)
	if refused != "" {
		h.fail(w, r, http.StatusBadRequest, refused)
		return
	}
	log := h.opts.Logger.With("action", "pause", "queue", t.name, "for", d, "by", by)
	st, err := t.p.Pause(ctx, d, &azdispatch.PauseOptions{By: by})
	h.overview.invalidate()
	if err != nil {
		log.Error("dashboard: pause failed", "err", err)
		msg := pauseFailure("pause", err)
		if len(t.units) > 1 {
			msg += " The shards that did not fail are paused: the overview shows each, and a resume ends them all."
		}
		h.fail(w, r, http.StatusBadGateway, msg)
		return
	}
	log.Info("dashboard: queue paused", "until", st.Until)
	seeOther(w, "./?done=paused")
}

// actResume ends the pause of the target the form names.
func (h *Handler) actResume(ctx context.Context, w http.ResponseWriter, r *http.Request, get func(string) string) {
	t := h.topo.pausable[bounded(get("queue"), 100)]
	if t == nil {
		h.fail(w, r, http.StatusBadRequest, "There is no such queue, or it cannot be paused.")
		return
	}
	log := h.opts.Logger.With("action", "resume", "queue", t.name)
	err := t.p.Resume(ctx)
	h.overview.invalidate()
	if err != nil {
		log.Error("dashboard: resume failed", "err", err)
		msg := pauseFailure("resume", err)
		if len(t.units) > 1 {
			msg += " The shards that did not fail are resumed: the overview shows each."
		}
		h.fail(w, r, http.StatusBadGateway, msg)
		return
	}
	log.Info("dashboard: queue resumed")
	seeOther(w, "./?done=resumed")
}

// pauseFailure says why a pause or resume failed: the error as every page
// describes it (a refused request says which permission it lacks), after
// the step that failed. A pause reads the queue's metadata, then writes it
// whole with the pause.
func pauseFailure(verb string, err error) string {
	var se *azdispatch.StorageError
	if !errors.As(err, &se) {
		return fmt.Sprintf("The %s failed: %s.", verb, cleanError(err))
	}
	step := "writing the queue's metadata (Set Queue Metadata)"
	if se.Op == azdispatch.OpDepth {
		step = "reading the queue's metadata (Get Queue Properties)"
	}
	return fmt.Sprintf("The %s failed at %s: %s.", verb, step, cleanError(err))
}
