package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"text/tabwriter"

	"github.com/azdispatch/azdispatch"
)

// depthRow is one queue's depth and its poison queue's.
type depthRow struct {
	Queue       string `json:"queue"`
	Account     string `json:"account"`
	Depth       int    `json:"depth"`
	PoisonDepth int    `json:"poison_depth"`
	// Visible, with -visible, is how many messages a peek saw: all the
	// visible ones, unless it is Full (32, a peek's most). Depth less
	// Visible is then the hidden ones: delayed, or being handled; the
	// service cannot tell those two apart.
	Visible *int   `json:"visible,omitempty"`
	Full    bool   `json:"visible_full,omitempty"`
	Error   string `json:"error,omitempty"`
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
	var visible bool
	fs := c.flagSet("depth", "depth (-queue NAME | -base NAME -shards N) [-visible] [flags]",
		`Prints the approximate number of messages of a queue, or of each shard of a set and
their total, with the same for their poison queues. Invisible messages (being handled,
or delayed) are included. One request per queue and per poison queue, and one more
for a queue that reads empty, to tell it from one that does not exist: a queue (or every
shard of a set) that does not exist fails the command, as a mistyped name.

With -visible, one peek more per queue counts its visible messages, ready to be
received, up to 32 (a peek's most): the rest of the depth is hidden, delayed or being
handled. The service tells those two apart nowhere, and counts no further than 32.`)
	o.register(fs)
	fs.BoolVar(&visible, "visible", false, "also count the visible messages of each queue (one peek each; up to 32)")
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
			if p, ok := u.queue.(peekable); ok && visible && e1 == nil && !missing[i] {
				var seen []*azdispatch.Delivery
				seen, e1 = p.Peek(ctx, azdispatch.MaxBatch)
				n := len(seen)
				r.Visible, r.Full = &n, n == azdispatch.MaxBatch
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
		head := []any{"QUEUE", "ACCOUNT", "DEPTH", "POISON"}
		if visible {
			head = append(head, "VISIBLE", "HIDDEN")
		}
		row(tw, head...)
		for _, r := range doc.Queues {
			if r.Error != "" {
				row(tw, r.Queue, r.Account, "error", "error")
				continue
			}
			cells := []any{r.Queue, r.Account, r.Depth, r.PoisonDepth}
			if r.Visible != nil {
				cells = append(cells, visibleCells(r)...)
			}
			row(tw, cells...)
		}
		if len(doc.Queues) > 1 {
			row(tw, "TOTAL", "", doc.Total, doc.PoisonTotal)
		}
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// visibleCells are the VISIBLE and HIDDEN cells of a row read with
// -visible: exact below a peek's 32, bounds from there.
func visibleCells(r depthRow) []any {
	hidden := max(r.Depth-*r.Visible, 0)
	if r.Full {
		return []any{fmt.Sprintf("%d+", *r.Visible), fmt.Sprintf("at most %d", hidden)}
	}
	return []any{*r.Visible, hidden}
}
