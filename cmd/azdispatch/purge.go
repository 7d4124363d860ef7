package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// purgeVisibility hides the envelopes a purge has received while it goes
// on, as Requeue does; those it keeps are made visible again at its end.
const purgeVisibility = 30 * time.Second

// purgeDoc is the result of poison purge.
type purgeDoc struct {
	Target   string `json:"target"`
	Selected string `json:"selected"`
	Deleted  int    `json:"deleted"`
	Skipped  int    `json:"skipped"` // envelopes not picked: kept
	Invalid  int    `json:"invalid"` // messages that are not envelopes: kept
}

func runPoisonPurge(ctx context.Context, c *cli, args []string) error {
	var o common
	var sel selectFlags
	var yes bool
	fs := c.flagSet("poison purge", "poison purge (-queue NAME | -base NAME -shards N) [-id ID] [-reason TEXT] [-max N] [-yes] [flags]",
		`Deletes envelopes from the poison queue(s): all of them, or those -id and -reason pick.
It asks for confirmation on the terminal; without a terminal it refuses (exit 2) unless
-yes is given. Messages that are not envelopes are kept. It receives the envelopes (hidden
for 30 s while it works) and makes those it keeps visible again at the end, so their
dequeue counts grow by one.`)
	o.register(fs)
	sel.register(fs)
	fs.BoolVar(&yes, "yes", false, "delete without asking")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := sel.check(); err != nil {
		return err
	}
	if err := o.target.check(needQueue); err != nil {
		return err
	}
	if !yes && !c.terminal() {
		return usageErrorf("purge deletes messages for good: refusing without a terminal to confirm on; pass -yes")
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, err := o.target.open(ctx, c, needQueue)
	if err != nil {
		return err
	}
	// Before asking: a mistyped name fails without a question.
	if err := t.mustExist(ctx, true); err != nil {
		return err
	}
	if !yes {
		fmt.Fprintf(c.stderr, "Delete %s from the poison queue(s) of %s for good? [y/N] ", sel.describe(), t.name())
		answer, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return usageErrorf("purge not confirmed: nothing deleted")
		}
	}

	doc := purgeDoc{Target: t.name(), Selected: sel.describe()}
	var errs []error
	for _, u := range t.units() {
		if u.poison == nil {
			continue
		}
		if sel.max > 0 && doc.Deleted >= sel.max {
			break
		}
		if err := purge(ctx, u.poison, &sel, &doc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.poison.Name(), err))
		}
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "DELETED", "SKIPPED", "INVALID")
		row(tw, doc.Deleted, doc.Skipped, doc.Invalid)
	}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// purge deletes the envelopes sel picks from one poison queue, counting in
// doc. Like Requeue, it remembers the IDs it has seen and stops at the first
// batch with nothing new.
func purge(ctx context.Context, poison azdispatch.Source, sel *selectFlags, doc *purgeDoc) error {
	filter := sel.filter()
	seen := make(map[string]bool)
	var kept []*azdispatch.Delivery
	defer func() {
		// Make what was kept visible at once rather than in 30 s, so a
		// listing right after the purge shows it. A failure only means it
		// reappears when its visibility ends.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, d := range kept {
			_ = poison.SetVisibility(rctx, d, 0)
		}
	}()
	for {
		want := azdispatch.MaxBatch
		if sel.max > 0 {
			if doc.Deleted >= sel.max {
				return nil
			}
			want = min(want, sel.max-doc.Deleted)
		}
		batch, err := poison.Receive(ctx, want, purgeVisibility)
		if err != nil {
			if queueNotFound(err) {
				return nil // never created: nothing was ever poisoned there
			}
			return err
		}
		fresh := 0
		for _, d := range batch {
			if seen[d.ID] || (sel.max > 0 && doc.Deleted >= sel.max) {
				kept = append(kept, d)
				continue
			}
			seen[d.ID] = true
			fresh++
			env, err := azdispatch.ParsePoison(d.Text)
			switch {
			case err != nil:
				doc.Invalid++
				kept = append(kept, d)
			case filter != nil && !filter(env):
				doc.Skipped++
				kept = append(kept, d)
			default:
				if err := poison.Delete(ctx, d); err != nil {
					return err
				}
				doc.Deleted++
			}
		}
		if fresh == 0 {
			return nil
		}
	}
}

// queueNotFound reports whether err is the service's 404 QueueNotFound.
func queueNotFound(err error) bool {
	var se *azdispatch.StorageError
	return errors.As(err, &se) && se.Code == "QueueNotFound"
}
