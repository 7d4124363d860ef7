package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch"
)

// scheduleReading is the schedules' records, as schedulers keep them in the
// payload store.
type scheduleReading struct {
	States []azdispatch.ScheduleState
	Err    string
}

// readSchedules lists the store's schedule records: one List Blobs per
// 5,000 blobs and one read per schedule.
func (h *Handler) readSchedules(ctx context.Context) scheduleReading {
	if h.topo.store == nil {
		return scheduleReading{}
	}
	ctx, cancel := withReadDeadline(ctx)
	defer cancel()
	states, err := h.topo.store.Schedules(ctx)
	slices.SortFunc(states, func(a, b azdispatch.ScheduleState) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return scheduleReading{States: states, Err: readError(ctx, err)}
}

// overdueGrace is how far past its next time a schedule may be before the
// page flags it: beyond a scheduler's default grace (twice its 15 s claim
// timeout), within which an occurrence taken over after a crash is still
// sent on time, and beyond any skew between this machine's clock and the
// one the schedulers go by (the storage service's).
const overdueGrace = time.Minute

// overdue is how far past s's next time now is, if by more than
// overdueGrace; zero for one on time, ended, or without a next time.
func overdue(s azdispatch.ScheduleState, now time.Time) time.Duration {
	if s.Ended || s.Next.IsZero() {
		return 0
	}
	if late := now.Sub(s.Next); late > overdueGrace {
		return late.Truncate(time.Second)
	}
	return 0
}

type schedulesBody struct {
	Store   string
	Err     string
	Rows    []scheduleRow
	Overdue int  // rows flagged overdue
	Write   bool // the viewer may pause, resume and run now
}

func (h *Handler) serveSchedules(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.schedules.get(r.Context())
	if err != nil {
		return
	}
	b := schedulesBody{Err: rd.Err, Write: h.writable(r)}
	now := h.opts.Now()
	for _, st := range rd.States {
		row := h.scheduleRow(st, now)
		if row.Overdue > 0 {
			b.Overdue++
		}
		b.Rows = append(b.Rows, row)
	}
	if h.topo.store != nil {
		b.Store = h.topo.store.Container()
	}
	h.render(w, r, http.StatusOK, "schedules", pageData{
		Title: "Schedules", Nav: "schedules", Write: b.Write, ReadAgo: fmtDuration(h.since(at)), Notice: notice(r), Body: b,
	})
}
