package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"text/tabwriter"
)

// depthRow is one queue's depth and its poison queue's.
type depthRow struct {
	Queue       string `json:"queue"`
	Account     string `json:"account"`
	Depth       int    `json:"depth"`
	PoisonDepth int    `json:"poison_depth"`
	Error       string `json:"error,omitempty"`
}

// depthDoc is the depth command's result.
type depthDoc struct {
	Target      string     `json:"target"`
	Queues      []depthRow `json:"queues"`
	Total       int        `json:"total"`
	PoisonTotal int        `json:"poison_total"`
}

func runDepth(ctx context.Context, c *cli, args []string) error {
	var o common
	fs := c.flagSet("depth", "depth (-queue NAME | -base NAME -shards N) [flags]",
		`Prints the approximate number of messages of a queue, or of each shard of a set and
their total, with the same for their poison queues. Invisible messages (being handled,
or delayed) are included. One request per queue and per poison queue, and one more
for a queue that reads empty, to tell it from one that does not exist: a queue (or every
shard of a set) that does not exist fails the command, as a mistyped name.`)
	o.register(fs)
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	t, err := o.target.open(c, needQueue)
	if err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()

	units := t.units()
	doc := depthDoc{Target: t.name(), Queues: make([]depthRow, len(units))}
	errs := make([]error, len(units))
	missing := make([]bool, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		doc.Queues[i] = depthRow{Queue: u.queue.Name(), Account: u.account}
		wg.Go(func() {
			r := &doc.Queues[i]
			var e1, e2 error
			r.Depth, e1 = u.queue.Depth(ctx)
			if q, ok := u.queue.(existence); ok && e1 == nil && r.Depth == 0 {
				// Only an empty queue may be a missing one: a request
				// more only then.
				exists, err := q.Exists(ctx)
				missing[i], e1 = err == nil && !exists, err
			}
			if u.poison != nil {
				r.PoisonDepth, e2 = u.poison.Depth(ctx)
			}
			if err := errors.Join(e1, e2); err != nil {
				r.Error = c.red.redact(err.Error())
				errs[i] = fmt.Errorf("%s: %w", u.queue.Name(), err)
			}
		})
	}
	wg.Wait()
	if !slices.Contains(missing, false) {
		// Not one of them exists: a mistyped name, not an empty queue.
		// (Some shards of a set missing is normal: they are created when
		// first sent to.)
		for i, r := range doc.Queues {
			doc.Queues[i].Error = errNoSuchQueue.Error()
			errs[i] = fmt.Errorf("%s: %w", r.Queue, errNoSuchQueue)
		}
	}
	for _, r := range doc.Queues {
		doc.Total += r.Depth
		doc.PoisonTotal += r.PoisonDepth
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "QUEUE", "ACCOUNT", "DEPTH", "POISON")
		for _, r := range doc.Queues {
			if r.Error != "" {
				row(tw, r.Queue, r.Account, "error", "error")
				continue
			}
			row(tw, r.Queue, r.Account, r.Depth, r.PoisonDepth)
		}
		if len(doc.Queues) > 1 {
			row(tw, "TOTAL", "", doc.Total, doc.PoisonTotal)
		}
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}
