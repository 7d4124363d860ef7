package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// scheduleView is one schedule's state, for output: the library's
// ScheduleState with snake_case keys, and null for a time not known yet.
type scheduleView struct {
	Queue string `json:"queue"`
	Name  string `json:"name"`
	Spec  string `json:"spec"`
	// Next is the first occurrence not yet sent; null once it has ended.
	Next *time.Time `json:"next"`
	// Last is the last occurrence sent, LastBy the instance that sent it,
	// LastSent when (by the storage service's clock) and LastLate whether
	// it was late; null and empty before the first.
	Last      *time.Time `json:"last"`
	LastBy    string     `json:"last_by"`
	LastSent  *time.Time `json:"last_sent"`
	LastLate  bool       `json:"last_late"`
	Sent      int64      `json:"sent"`
	Skipped   int64      `json:"skipped"`
	ClaimedBy string     `json:"claimed_by"` // the instance sending the next occurrences now, if any
	Ended     bool       `json:"ended"`
	// PausedSince, PausedUntil and PausedBy are the schedule's pause: null
	// and empty if none, or once a scheduler has decided the occurrences
	// it held (until then one that has ended still shows).
	PausedSince *time.Time `json:"paused_since"`
	PausedUntil *time.Time `json:"paused_until"`
	PausedBy    string     `json:"paused_by"`
	// RunNow is when a run-now was asked, while no scheduler has sent it;
	// LastRunNow the time of the last one sent.
	RunNow     *time.Time `json:"run_now"`
	LastRunNow *time.Time `json:"last_run_now"`
}

// schedulesDoc is the schedules command's result.
type schedulesDoc struct {
	Container string         `json:"container"`
	Queue     string         `json:"queue,omitempty"` // the queue or set it was narrowed to
	Schedules []scheduleView `json:"schedules"`
}

func runSchedules(ctx context.Context, c *cli, args []string) error {
	if len(args) > 0 {
		if run, ok := scheduleControls[args[0]]; ok {
			return run(ctx, c, args[1:])
		}
	}
	var o common
	fs := c.flagSet("schedules", "schedules [-queue NAME | -base NAME] [flags]",
		`Lists the schedules whose state a Scheduler keeps in the payload container of the first
account (-payload-container): for each, its queue (or sharded set), name and timetable,
its next occurrence (or "ended"), the last one sent, by which instance, how many were sent
and skipped (missed, not sent), and the instance that holds a claim on the next ones now,
if any (a claim may be stale: one older than the schedulers' ClaimTimeout is taken over).
-queue or -base narrows it to the schedules sending to that queue or set. One List Blobs
request per 5,000 blobs of the container, and one read per schedule.

  azdispatch schedules pause -queue NAME -name SCHEDULE -for DURATION [-by TEXT]
  azdispatch schedules resume -queue NAME -name SCHEDULE
  azdispatch schedules run -queue NAME -name SCHEDULE

pause, resume and run (one occurrence now, besides the timetable) change a schedule's
state; run azdispatch schedules <command> -h for more.`)
	o.register(fs)
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, queue, err := o.target.openPayloads(ctx, c)
	if err != nil {
		return err
	}
	states, lerr := t.store.Schedules(ctx)
	if lerr != nil && len(states) == 0 {
		return lerr // nothing to show: an empty list would read as "no schedules"
	}
	doc := schedulesDoc{Container: t.store.Container(), Queue: queue, Schedules: []scheduleView{}}
	for _, s := range states {
		if queue == "" || s.Queue == queue {
			doc.Schedules = append(doc.Schedules, newScheduleView(s))
		}
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		where := "in container " + doc.Container
		if doc.Queue != "" {
			where = "of " + doc.Queue + " " + where
		}
		if len(doc.Schedules) == 0 {
			fmt.Fprintf(tw, "No schedules %s.\n", where)
			return
		}
		row(tw, "QUEUE", "SCHEDULE", "SPEC", "NEXT", "LAST", "LAST BY", "SENT", "SKIPPED", "CLAIMED BY", "PAUSED UNTIL")
		for _, s := range doc.Schedules {
			next := stampOf(s.Next)
			if s.Ended {
				next = "ended"
			}
			last := stampOf(s.Last)
			if s.LastLate {
				last += " (late)"
			}
			row(tw, oneLine(s.Queue), oneLine(s.Name), oneLine(s.Spec), next, last, orDash(s.LastBy), s.Sent, s.Skipped, orDash(s.ClaimedBy), stampOf(s.PausedUntil))
		}
		tw.Flush()
		fmt.Fprintf(tw, "%d schedule(s) %s.\n", len(doc.Schedules), where)
	}); err != nil {
		return errors.Join(err, lerr)
	}
	return lerr
}

func newScheduleView(s azdispatch.ScheduleState) scheduleView {
	return scheduleView{
		Queue: s.Queue, Name: s.Name, Spec: s.Spec,
		Next: timeOrNil(s.Next), Last: timeOrNil(s.Last), LastBy: s.LastBy, LastSent: timeOrNil(s.LastSent), LastLate: s.LastLate,
		Sent: s.Sent, Skipped: s.Skipped, ClaimedBy: s.ClaimedBy, Ended: s.Ended,
		PausedSince: timeOrNil(s.Paused.Since), PausedUntil: timeOrNil(s.Paused.Until), PausedBy: s.Paused.By,
		RunNow: timeOrNil(s.RunNow), LastRunNow: timeOrNil(s.LastRunNow),
	}
}

// timeOrNil is t in UTC, or nil when it is zero (not known).
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// stampOf is stamp for a time that may be nil.
func stampOf(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

// orDash is s for a table cell, "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return oneLine(s)
}
