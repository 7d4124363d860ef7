package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/azdispatch/azdispatch"
)

// groupDoc is the groups command's result: a group's progress, with
// snake_case keys.
type groupDoc struct {
	Container string         `json:"container"`
	ID        string         `json:"id"`
	Size      int            `json:"size"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Pending   int            `json:"pending"`
	Complete  bool           `json:"complete"`
	Outcome   string         `json:"outcome"` // "succeeded" or "failed" once complete; "" before
	Failures  []groupFailure `json:"failures"`
}

type groupFailure struct {
	Child  int    `json:"child"`
	Reason string `json:"reason"`
}

func runGroups(ctx context.Context, c *cli, args []string) error {
	var o common
	fs := c.flagSet("groups", "groups -id ID [flags]",
		`Shows the progress of a group of messages (PayloadStore.StartGroup) kept in the payload
container of the first account (-payload-container): its children succeeded, poisoned
(with the reasons of the first 100) and pending, and whether it is complete, with its
outcome. One blob read, and one more per 64 children beyond the first 64. Exits 3 while
the group is not complete.`)
	o.register(fs)
	id := fs.String("id", "", "the group's ID")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return usageErrorf("groups needs -id (run groups -h for help)")
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, _, err := o.target.openPayloads(ctx, c)
	if err != nil {
		return err
	}
	st, err := t.store.GroupStatus(ctx, *id)
	if err != nil {
		return err
	}
	doc := groupDocOf(t.store.Container(), st)
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "GROUP", "SIZE", "SUCCEEDED", "FAILED", "PENDING", "OUTCOME")
		outcome := doc.Outcome
		if !doc.Complete {
			outcome = "waiting"
		}
		row(tw, oneLine(doc.ID), doc.Size, doc.Succeeded, doc.Failed, doc.Pending, outcome)
		if len(doc.Failures) > 0 {
			fmt.Fprintln(tw)
			row(tw, "CHILD", "REASON")
			for _, f := range doc.Failures {
				row(tw, f.Child, oneLine(f.Reason))
			}
		}
		tw.Flush()
	}); err != nil {
		return err
	}
	if !doc.Complete {
		return errAttention
	}
	return nil
}

func groupDocOf(container string, st azdispatch.GroupStatus) groupDoc {
	doc := groupDoc{Container: container, ID: st.ID, Size: st.Size, Succeeded: st.Succeeded, Failed: st.Failed,
		Pending: st.Pending, Complete: st.Complete, Outcome: st.Outcome, Failures: []groupFailure{}}
	for _, f := range st.Failures {
		doc.Failures = append(doc.Failures, groupFailure{Child: f.Child, Reason: f.Reason})
	}
	return doc
}
