package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/azdispatch/azdispatch"
)

// An operator pauses a schedule (its occurrences are not sent), resumes it,
// or asks for one occurrence now, from the schedules page, through the
// confirmation page as every other action. Each is a change of the
// schedule's record in the payload store (see
// [azdispatch.PayloadStore.PauseSchedule]): every scheduler of it, in any
// process, finds the change when it next reads the record.

// scheduleRef names a schedule, as a form carries it: the queue it sends
// to, and its name.
type scheduleRef struct{ Queue, Name string }

func readScheduleRef(get func(string) string) scheduleRef {
	return scheduleRef{Queue: bounded(get("queue"), 100), Name: bounded(get("name"), 100)}
}

func (s scheduleRef) String() string { return fmt.Sprintf("schedule %s of queue %s", s.Name, s.Queue) }

// scheduleConfirmation describes a schedule action for its confirmation
// page; it needs a payload store, where schedules keep their records.
func (h *Handler) scheduleConfirmation(b confirmBody, do string, get func(string) string) (confirmBody, bool) {
	ref := readScheduleRef(get)
	if h.topo.store == nil || ref.Queue == "" || ref.Name == "" {
		return b, false
	}
	b.Cancel = "schedules"
	b.Fields = []hidden{{"queue", ref.Queue}, {"name", ref.Name}}
	switch do {
	case "schedule-pause":
		b.Question = fmt.Sprintf("Pause %s? No scheduler sends its occurrences until the pause ends or is resumed; "+
			"those that fall in the pause are missed, and the schedule's misfire policy says which are sent when it ends. "+
			"A run now is still sent. Each scheduler notices within its watch period (30 s by default).", ref)
		b.Inputs = pauseInputs(get)
	case "schedule-resume":
		b.Question = fmt.Sprintf("End the pause of %s now? The occurrences it held were missed: the schedule's misfire policy says which are sent. "+
			"Each scheduler notices within its watch period (30 s by default).", ref)
	case "schedule-run":
		b.Question = fmt.Sprintf("Send one occurrence of %s now, besides its timetable, paused or not? "+
			"The first scheduler to read the schedule sends it, once across every instance, within its watch period (30 s by default); "+
			"a second asked within ten seconds is the same one.", ref)
	}
	return b, true
}

// scheduleNow says what the last reading found of the schedule get names,
// for its confirmation page; it fails only when the viewer left.
func (h *Handler) scheduleNow(r *http.Request, get func(string) string) (string, error) {
	rd, _, err := h.schedules.get(r.Context())
	if err != nil {
		return "", err
	}
	if rd.Err != "" {
		return "The schedules could not be read (" + rd.Err + "): the action changes nothing if there is no such schedule.", nil
	}
	ref := readScheduleRef(get)
	for _, st := range rd.States {
		if st.Queue == ref.Queue && st.Name == ref.Name {
			row := h.scheduleRow(st, h.opts.Now())
			return fmt.Sprintf("By the last reading: %s; run now: %s.", row.PauseWords, row.RunNowWords), nil
		}
	}
	return "The last reading has no such schedule (no scheduler has started it?): the action changes nothing if there is none.", nil
}

// actSchedule pauses, resumes or runs now the schedule the form names.
func (h *Handler) actSchedule(ctx context.Context, w http.ResponseWriter, r *http.Request, do string, get func(string) string) {
	store := h.topo.store
	ref := readScheduleRef(get)
	if store == nil || ref.Queue == "" || ref.Name == "" {
		h.fail(w, r, http.StatusBadRequest, "There is no such schedule.")
		return
	}
	log := h.opts.Logger.With("action", do, "queue", ref.Queue, "schedule", ref.Name)
	var st azdispatch.ScheduleState
	var err error
	done := ""
	switch do {
	case "schedule-pause":
		d, by, refused := readPause(get)
		if refused != "" {
			h.fail(w, r, http.StatusBadRequest, refused)
			return
		}
		log = log.With("for", d, "by", by)
		st, err = store.PauseSchedule(ctx, ref.Queue, ref.Name, d, &azdispatch.PauseOptions{By: by})
		done = "schedule-paused"
	case "schedule-resume":
		st, err = store.ResumeSchedule(ctx, ref.Queue, ref.Name)
		done = "schedule-resumed"
	case "schedule-run":
		st, err = store.RunScheduleNow(ctx, ref.Queue, ref.Name)
		done = "schedule-run"
	}
	h.schedules.invalidate()
	switch {
	case errors.Is(err, azdispatch.ErrScheduleNotFound):
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no %s: no scheduler has started it. Nothing changed.", ref))
		return
	case errors.Is(err, azdispatch.ErrScheduleEnded):
		h.fail(w, r, http.StatusConflict, fmt.Sprintf("The %s has ended: its timetable has no occurrence left to run. Nothing changed.", ref))
		return
	case err != nil:
		log.Error("dashboard: schedule change failed", "err", err)
		h.fail(w, r, http.StatusBadGateway, "The change of the schedule failed: "+cleanError(err)+". Nothing changed.")
		return
	}
	log.Info("dashboard: schedule changed", "paused_until", st.Paused.Until, "run_now", st.RunNow)
	seeOther(w, "schedules?done="+done)
}

// scheduleRow is one schedule as the page shows it.
type scheduleRow struct {
	azdispatch.ScheduleState
	// Overdue is how far its next occurrence is past, if by more than
	// overdueGrace: no scheduler has sent it (none runs, or none reaches
	// storage). Zero otherwise.
	Overdue time.Duration
	// PausedNow says its pause holds, by the service's clock;
	// PauseWords says it ("paused by ops until …", "not paused").
	PausedNow  bool
	PauseWords string
	// RunNowWords says whether a run now waits for a scheduler, or when
	// the last was sent.
	RunNowWords string
}

// scheduleRow is how the page shows st, with now the dashboard's clock
// (for Overdue, as the rest of the page) and the pause judged by the
// service's, whose clock ended it.
func (h *Handler) scheduleRow(st azdispatch.ScheduleState, now time.Time) scheduleRow {
	row := scheduleRow{ScheduleState: st, Overdue: overdue(st, now), PauseWords: "not paused", RunNowWords: "none asked"}
	service := now
	if h.topo.storeTime != nil {
		service = h.topo.storeTime()
	}
	if st.Paused.Active(service) {
		row.PausedNow, row.PauseWords = true, describePause(st.Paused)
	}
	switch {
	case !st.RunNow.IsZero():
		row.RunNowWords = "asked at " + stamp(st.RunNow) + ", waiting for a scheduler"
	case !st.LastRunNow.IsZero():
		row.RunNowWords = "the last one, asked at " + stamp(st.LastRunNow) + ", was sent"
	}
	return row
}
