package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// depthRow is one queue's depth and its poison queue's.
type depthRow struct {
	Queue       string `json:"queue"`
	Account     string `json:"account"`
	Depth       int    `json:"depth"`
	PoisonDepth int    `json:"poison_depth"`
	// Missing says the queue does not exist: a shard never sent to, whose
	// depth of 0 is no reading. The table shows "no queue".
	Missing bool `json:"missing,omitempty"`
	// Visible, with -visible, is how many messages a peek saw: all the
	// visible ones, unless it is Full (32, a peek's most). Depth less
	// Visible is then the hidden ones: delayed, or being handled; the
	// service cannot tell those two apart.
	Visible *int `json:"visible,omitempty"`
	Full    bool `json:"visible_full,omitempty"`
	// OldestAge is how long the oldest of the front messages of the queue
	// has waited, in seconds by the service's clock (azdispatch.OldestAge);
	// absent when the queue could not be read.
	OldestAge *float64 `json:"oldest_age_s,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// depthDoc is the depth command's result.
type depthDoc struct {
	Target      string     `json:"target"`
	Queues      []depthRow `json:"queues"`
	Total       int        `json:"total"`
	PoisonTotal int        `json:"poison_total"`
	// OldestAge is the greatest of the queues' ages; absent when one of
	// them could not be read, since it might have been the oldest.
	OldestAge *float64 `json:"oldest_age_s,omitempty"`
}

func runDepth(ctx context.Context, c *cli, args []string) error {
	var o common
	var visible bool
	o.target.several = true
	fs := c.flagSet("depth", "depth (-queue NAME | -base NAME -shards N | -prefix PREFIX)... [-visible] [flags]",
		`Prints the approximate number of messages of a queue, or of each shard of a set and
their total, with the same for their poison queues. Invisible messages (being handled,
or delayed) are included. OLDEST is how long the oldest of the messages at the front of
each queue has waited, by the service's clock, to the second: an approximation, since the
service keeps no strict order and a peek sees no hidden message. Three requests per queue:
its depth, its poison queue's depth, and a peek of up to 32 messages for the age; and one more
for a queue that reads empty, to tell it from one that does not exist: a queue (or every
shard of a set) that does not exist fails the command, as a mistyped name; a shard of a set
that was never created is shown as "no queue" (missing in JSON), not as empty.

With -visible, that peek also counts the visible messages, ready to be received, up to
32 (a peek's most), at no further request. The rest of the depth is hidden, delayed or being handled. The
service tells those two apart nowhere, and counts no further than 32.

Several targets make one table and one total, in the order given: repeat -queue, or -base
with its own -shards each (the first -shards goes with the first -base). For example:

  azdispatch depth -queue orders -queue invoices -base events -shards 4`)
	o.register(fs)
	fs.BoolVar(&visible, "visible", false, "also count the visible messages of each queue (up to 32, with the peek that reads the age)")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	ts, err := o.target.openAll(ctx, c, needQueue)
	if err != nil {
		return err
	}

	// units of every target, in order; of[i] is the target of units[i].
	var units []unit
	var of []int
	var names []string
	for k, t := range ts {
		for _, u := range t.units() {
			units, of = append(units, u), append(of, k)
		}
		names = append(names, t.name())
	}
	doc := depthDoc{Target: strings.Join(names, ", "), Queues: make([]depthRow, len(units))}
	errs := make([]error, len(units))
	missing := make([]bool, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		doc.Queues[i] = depthRow{Queue: u.queue.Name(), Account: u.account}
		wg.Go(func() {
			r := &doc.Queues[i]
			var e1, e2 error
			r.Depth, e1 = u.queue.Depth(ctx)
			if existsNow := azdispatch.CapabilitiesOf(u.queue).Exists; existsNow != nil && e1 == nil && r.Depth == 0 {
				// Only an empty queue may be a missing one: a request
				// more only then.
				exists, err := existsNow(ctx)
				missing[i], e1 = err == nil && !exists, err
			}
			if u.poison != nil {
				r.PoisonDepth, e2 = u.poison.Depth(ctx)
			}
			switch {
			case e1 != nil:
			case missing[i]:
				// Nothing waits in a queue that does not exist: no
				// request to say so.
				r.Missing, r.OldestAge = true, new(0.0)
			default:
				e1 = readFront(ctx, u.queue, visible, r)
			}
			if err := errors.Join(e1, e2); err != nil {
				r.Error = c.red.redact(err.Error())
				errs[i] = fmt.Errorf("%s: %w", u.queue.Name(), err)
			}
		})
	}
	wg.Wait()
	for k := range ts {
		exists := false
		for i := range units {
			exists = exists || (of[i] == k && !missing[i])
		}
		if exists {
			continue
		}
		// Not one queue of this target exists: a mistyped name, not an
		// empty queue. (A shard of a set never sent to is missing alone.)
		for i, r := range doc.Queues {
			if of[i] == k {
				doc.Queues[i].Error = errNoSuchQueue.Error()
				errs[i] = fmt.Errorf("%s: %w", r.Queue, errNoSuchQueue)
			}
		}
	}
	oldest, aged := 0.0, true
	for _, r := range doc.Queues {
		doc.Total += r.Depth
		doc.PoisonTotal += r.PoisonDepth
		if r.OldestAge == nil || r.Error != "" {
			aged = false
			continue
		}
		oldest = max(oldest, *r.OldestAge)
	}
	if aged {
		doc.OldestAge = &oldest
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		head := []any{"QUEUE", "ACCOUNT", "DEPTH", "POISON", "OLDEST"}
		if visible {
			head = append(head, "VISIBLE", "HIDDEN")
		}
		row(tw, head...)
		for _, r := range doc.Queues {
			switch {
			case r.Error != "":
				row(tw, r.Queue, r.Account, "error", "error", "error")
				continue
			case r.Missing:
				row(tw, r.Queue, r.Account, "no queue", r.PoisonDepth, "-")
				continue
			}
			cells := []any{r.Queue, r.Account, r.Depth, r.PoisonDepth, ageCell(r.OldestAge)}
			if r.Visible != nil {
				cells = append(cells, visibleCells(r)...)
			}
			row(tw, cells...)
		}
		if len(doc.Queues) > 1 {
			row(tw, "TOTAL", "", doc.Total, doc.PoisonTotal, ageCell(doc.OldestAge))
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

// readFront reads the age of the messages at the front of q into r with
// one peek of up to 32, which with visible also counts the visible ones.
func readFront(ctx context.Context, q azdispatch.Shard, visible bool, r *depthRow) error {
	var src azdispatch.Source = q
	if visible {
		peek := azdispatch.CapabilitiesOf(q).Peek
		if peek == nil {
			return fmt.Errorf("%s cannot peek", q.Name())
		}
		seen, err := peek(ctx, azdispatch.MaxBatch)
		if err != nil {
			return err
		}
		n := len(seen)
		r.Visible, r.Full = &n, n == azdispatch.MaxBatch
		src = peeked{Source: q, front: seen}
	}
	age, err := azdispatch.OldestAge(ctx, src)
	if err != nil {
		return err
	}
	r.OldestAge = new(age.Seconds())
	return nil
}

// peeked is a queue whose front was peeked already: azdispatch.OldestAge
// reads the age from that answer instead of peeking again, so that the
// rule for a message's age (its due time, for one sent for later) stays
// the library's alone.
type peeked struct {
	azdispatch.Source
	front []*azdispatch.Delivery
}

// Peek returns the front messages already peeked, up to max.
func (p peeked) Peek(_ context.Context, max int) ([]*azdispatch.Delivery, error) {
	return p.front[:min(len(p.front), max)], nil
}

// ageCell is a table cell for an age in seconds: a duration, "-" when
// unknown.
func ageCell(s *float64) string {
	if s == nil {
		return "-"
	}
	return (time.Duration(*s) * time.Second).String()
}
