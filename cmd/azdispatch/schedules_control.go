package main

import (
	"context"
	"flag"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// scheduleControls are the subcommands of schedules that change a
// schedule's state.
var scheduleControls = map[string]func(context.Context, *cli, []string) error{
	"pause": runSchedulePause, "resume": runScheduleResume, "run": runScheduleRun,
}

func runSchedulePause(ctx context.Context, c *cli, args []string) error {
	var d time.Duration
	var by string
	return controlSchedule(ctx, c, args, "pause", "-for DURATION [-by TEXT]",
		`Pauses the schedule for DURATION on the storage service's clock: no scheduler sends its
occurrences until the pause ends or "azdispatch schedules resume"; then those that fell in
the pause were missed, and the schedule's misfire policy says which are sent (one catch-up
by default). A run-now is still sent. The schedulers see it within their Watch (30 s by
default). A read and a write. For example:

  azdispatch schedules pause -queue reports -name nightly -for 4h -by "ops: warehouse migration"`,
		func(fs *flag.FlagSet) {
			fs.DurationVar(&d, "for", 0, "how long the pause lasts, by the service's clock (30m, 2h)")
			fs.StringVar(&by, "by", "", "who paused, and why (up to 256 bytes)")
		},
		func() error {
			if d <= 0 {
				return usageErrorf("schedules pause needs -for DURATION, above 0 (resume ends a pause)")
			}
			return nil
		},
		func(s *azdispatch.PayloadStore, ctx context.Context, queue, name string) (azdispatch.ScheduleState, error) {
			return s.PauseSchedule(ctx, queue, name, d, &azdispatch.PauseOptions{By: by})
		})
}

func runScheduleResume(ctx context.Context, c *cli, args []string) error {
	return controlSchedule(ctx, c, args, "resume", "",
		`Ends the schedule's pause now; the occurrences it held follow the schedule's misfire
policy. A schedule not paused is left as it is. One read, and a write if paused.`,
		nil, nil, (*azdispatch.PayloadStore).ResumeSchedule)
}

func runScheduleRun(ctx context.Context, c *cli, args []string) error {
	return controlSchedule(ctx, c, args, "run", "",
		`Asks for one occurrence of the schedule now, besides its timetable, paused or not: the
first scheduler to look sends it, once across every instance (within their Watch, 30 s by
default), marked as a run-now. A run asked while another waits, or within ten seconds of
one, is that one: two operators at once get one occurrence. A read and a write.`,
		nil, nil, (*azdispatch.PayloadStore).RunScheduleNow)
}

// controlSchedule parses the flags of schedules <what> (-name, the target's,
// and those extra adds), checks them with check, does do, and prints the
// schedule's state after.
func controlSchedule(ctx context.Context, c *cli, args []string, what, usage, help string,
	extra func(*flag.FlagSet), check func() error,
	do func(*azdispatch.PayloadStore, context.Context, string, string) (azdispatch.ScheduleState, error)) error {
	var o common
	var name string
	fs := c.flagSet("schedules "+what, "schedules "+what+" (-queue NAME | -base NAME) -name SCHEDULE "+usage+" [flags]", help)
	o.register(fs)
	fs.StringVar(&name, "name", "", "the schedule's name, as \"azdispatch schedules\" lists it")
	if extra != nil {
		extra(fs)
	}
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if name == "" {
		return usageErrorf("schedules %s needs -name SCHEDULE", what)
	}
	if err := o.target.check(needQueue); err != nil {
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, queue, err := o.target.openPayloads(ctx, c)
	if err != nil {
		return err
	}
	st, err := do(t.store, ctx, queue, name)
	if err != nil {
		return err
	}
	v := newScheduleView(st)
	return c.emit(o.json, v, func(tw *tabwriter.Writer) {
		row(tw, "QUEUE", "SCHEDULE", "NEXT", "PAUSED UNTIL", "PAUSED BY", "RUN NOW ASKED")
		row(tw, oneLine(v.Queue), oneLine(v.Name), stampOf(v.Next), stampOf(v.PausedUntil), orDash(v.PausedBy), stampOf(v.RunNow))
	})
}
