package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// sweepDoc is the sweep command's result.
type sweepDoc struct {
	Container string `json:"container"`
	Queue     string `json:"queue,omitempty"` // the queue it was narrowed to
	DryRun    bool   `json:"dry_run"`
	Scanned   int    `json:"scanned"`
	// Deleted counts the orphaned payloads removed, or in a dry run those a
	// sweep would remove now.
	Deleted  int `json:"deleted"`
	Live     int `json:"live"`
	Poisoned int `json:"poisoned"`
	Foreign  int `json:"foreign"`
}

func runSweep(ctx context.Context, c *cli, args []string) error {
	var o common
	var apply bool
	var grace time.Duration
	fs := c.flagSet("sweep", "sweep [-queue NAME | -base NAME] [-grace D] [-apply] [flags]",
		`Finds the payload blobs that no message can point at any more (the library's Sweep: their
message has expired, plus -grace) in the payload container of the first account. A DRY RUN
by default: it only lists and counts what it would delete; -apply deletes. -queue or -base
narrows it to the payloads sent to that queue or set; without them it sweeps the whole
container. Payloads held by poison envelopes are never swept.
A dry run that finds payloads to delete exits 3.`)
	o.register(fs)
	fs.BoolVar(&apply, "apply", false, "delete the orphaned payloads (default: dry run)")
	fs.DurationVar(&grace, "grace", time.Hour, "keep payloads this long past their message's expiry")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if grace <= 0 {
		return usageErrorf("-grace must be positive")
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, queue, err := o.target.openPayloads(ctx, c)
	if err != nil {
		return err
	}
	res, serr := azdispatch.Sweep(ctx, t.store, &azdispatch.SweepOptions{Grace: grace, Queue: queue, DryRun: !apply})
	doc := sweepDoc{
		Container: t.store.Container(), Queue: queue, DryRun: !apply,
		Scanned: res.Scanned, Deleted: res.Deleted, Live: res.Live, Poisoned: res.Poisoned, Foreign: res.Foreign,
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		verb := "DELETED"
		if doc.DryRun {
			verb = "TO DELETE"
		}
		row(tw, "SCANNED", verb, "LIVE", "POISONED", "FOREIGN")
		row(tw, doc.Scanned, doc.Deleted, doc.Live, doc.Poisoned, doc.Foreign)
		if doc.DryRun {
			tw.Flush()
			fmt.Fprintln(tw, "Dry run: nothing deleted. Run again with -apply to delete.")
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if doc.DryRun && doc.Deleted > 0 {
		return errAttention
	}
	return nil
}
