package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"

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
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	ctx, count := azdispatch.CountTransactions(ctx)
	defer func() { h.own.add(count()) }()
	states, err := h.topo.store.Schedules(ctx)
	slices.SortFunc(states, func(a, b azdispatch.ScheduleState) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return scheduleReading{States: states, Err: cleanError(err)}
}

type schedulesBody struct {
	Store string
	R     scheduleReading
}

func (h *Handler) serveSchedules(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.schedules.get(r.Context())
	if err != nil {
		return
	}
	b := schedulesBody{R: rd}
	if h.topo.store != nil {
		b.Store = h.topo.store.Container()
	}
	h.render(w, r, http.StatusOK, "schedules", pageData{
		Title: "Schedules", Nav: "schedules", Write: h.writable(r), ReadAgo: fmtDuration(h.since(at)), Body: b,
	})
}
