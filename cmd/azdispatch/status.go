package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// groupDoc is the status command's result for a group: a group's progress, with
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

// messageDoc is the status command's result for a tracked message, with
// snake_case keys.
type messageDoc struct {
	Container string    `json:"container"`
	Token     string    `json:"token"`
	State     string    `json:"state"`
	Final     bool      `json:"final"`
	Queue     string    `json:"queue"`
	MessageID string    `json:"message_id"`
	Tries     int       `json:"tries"`
	Reason    string    `json:"reason"`
	Updated   time.Time `json:"updated"`
}

func runStatus(ctx context.Context, c *cli, args []string) error {
	var o common
	fs := c.flagSet("status", "status (-group ID | -token TOKEN) [flags]",
		`Shows what became of a group of messages (PayloadStore.StartGroup) or of a tracked
message (SendOptions.Track, by its Sent.StatusToken), kept in the payload container of
the first account (-payload-container).

A group: its children succeeded, poisoned (with the reasons of the first 100) and
pending, and whether it is complete, with its outcome; one blob read, and one more per
64 children beyond the first 64. A message: its state (pending, delivered, failed,
succeeded, poisoned, cancelled), tries and last reason; one blob read.

Exits 3 while the group is not complete, or the message has not ended.`)
	o.register(fs)
	id := fs.String("group", "", "the group's ID")
	token := fs.String("token", "", "the tracked message's status token")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if (*id == "") == (*token == "") {
		return usageErrorf("status needs -group or -token, one of them (run status -h for help)")
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, _, err := o.target.openPayloads(ctx, c)
	if err != nil {
		return err
	}
	if *token != "" {
		return showMessageStatus(ctx, c, o, t.store, *token)
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

// showMessageStatus shows a tracked message's status.
func showMessageStatus(ctx context.Context, c *cli, o common, store *azdispatch.PayloadStore, token string) error {
	st, err := store.MessageStatus(ctx, token)
	if err != nil {
		return err
	}
	doc := messageDoc{Container: store.Container(), Token: st.Token, State: st.State, Final: st.Final, Queue: st.Queue,
		MessageID: st.MessageID, Tries: st.Tries, Reason: st.Reason, Updated: st.Updated.UTC()}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "TOKEN", "STATE", "QUEUE", "MESSAGE", "TRIES", "UPDATED", "REASON")
		row(tw, doc.Token, doc.State, oneLine(doc.Queue), oneLine(doc.MessageID), doc.Tries, doc.Updated.Format(time.RFC3339), oneLine(doc.Reason))
		tw.Flush()
	}); err != nil {
		return err
	}
	if !doc.Final {
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
