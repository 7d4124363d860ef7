package main

import (
	"context"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// pauseDoc is the result of pause and resume: the pause as it stands.
type pauseDoc struct {
	Target string     `json:"target"`
	Paused bool       `json:"paused"`
	Since  *time.Time `json:"since,omitempty"`
	Until  *time.Time `json:"until,omitempty"`
	By     string     `json:"by,omitempty"`
}

func runPause(ctx context.Context, c *cli, args []string) error {
	var o common
	var d time.Duration
	var by string
	var status bool
	fs := c.flagSet("pause", "pause (-queue NAME | -base NAME -shards N) (-for DURATION [-by TEXT] | -status) [flags]",
		`Pauses every listener of the queue (every shard of a set), in every process, for DURATION
on the service's clock: they receive nothing from one scale interval (10 s by default) on,
finish what they hold, and go on when the pause ends or at "azdispatch resume". A pause
given while one stands replaces it. The pause is kept in the queue's metadata: two requests
per queue. -by says who paused, and why, for whoever looks (up to 256 bytes). -status
shows the pause that stands, if any, and changes nothing. For example:

  azdispatch pause -queue orders -for 30m -by "ops: the payments API is down"`)
	o.register(fs)
	fs.DurationVar(&d, "for", 0, "how long the pause lasts, by the service's clock (30m, 2h)")
	fs.StringVar(&by, "by", "", "who paused, and why (shown wherever the pause is)")
	fs.BoolVar(&status, "status", false, "show the pause that stands; change nothing")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if status == (d != 0) {
		return usageErrorf("pause needs -for DURATION (above 0), or -status")
	}
	if d < 0 {
		return usageErrorf("-for %v: a pause lasts more than 0 (resume ends one)", d)
	}
	return withPauser(ctx, c, &o, func(ctx context.Context, p azdispatch.Pauser) (azdispatch.PauseState, error) {
		if status {
			return p.PauseState(ctx)
		}
		return p.Pause(ctx, d, &azdispatch.PauseOptions{By: by})
	})
}

func runResume(ctx context.Context, c *cli, args []string) error {
	var o common
	fs := c.flagSet("resume", "resume (-queue NAME | -base NAME -shards N) [flags]",
		`Ends the pause of the queue (every shard of a set): its listeners receive again within
one scale interval. A queue not paused is left as it is. One or two requests per queue.`)
	o.register(fs)
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	return withPauser(ctx, c, &o, func(ctx context.Context, p azdispatch.Pauser) (azdispatch.PauseState, error) {
		return azdispatch.PauseState{}, p.Resume(ctx)
	})
}

// withPauser opens the target, which must exist, does f on it and prints
// the pause that stands after.
func withPauser(ctx context.Context, c *cli, o *common, f func(context.Context, azdispatch.Pauser) (azdispatch.PauseState, error)) error {
	if err := o.target.check(needQueue); err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, err := o.target.open(ctx, c, needQueue)
	if err != nil {
		return err
	}
	if err := t.mustExist(ctx, false); err != nil {
		return err
	}
	var p azdispatch.Pauser = t.queue
	if t.sharded != nil {
		p = t.sharded
	}
	st, err := f(ctx, p)
	if err != nil {
		return err
	}
	doc := pauseDoc{Target: t.name(), Paused: !st.Until.IsZero(), By: st.By}
	if doc.Paused {
		since, until := st.Since.UTC(), st.Until.UTC()
		doc.Since, doc.Until = &since, &until
	}
	return c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "TARGET", "PAUSED", "SINCE", "UNTIL", "BY")
		if !doc.Paused {
			row(tw, doc.Target, "no", "-", "-", "-")
			return
		}
		row(tw, doc.Target, "yes", stamp(*doc.Since), stamp(*doc.Until), oneLine(doc.By))
	})
}
