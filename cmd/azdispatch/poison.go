package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/azdispatch/azdispatch"
)

func runPoison(ctx context.Context, c *cli, args []string) error {
	sub := map[string]func(context.Context, *cli, []string) error{
		"list": runPoisonList, "show": runPoisonShow, "requeue": runPoisonRequeue, "purge": runPoisonPurge,
	}
	if len(args) > 0 {
		if run, ok := sub[args[0]]; ok {
			return run(ctx, c, args[1:])
		}
	}
	fmt.Fprint(c.stderr, `Usage: azdispatch poison <list | show ID | requeue | purge> [flags]

  list      the envelopes at the front of the poison queue(s), with reason and counts
  show ID   one envelope in full, body included
  requeue   move envelopes back to their queue with their original text
  purge     delete envelopes (asks first, or -yes)

Run azdispatch poison <command> -h for its flags.
`)
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			return usageErrorf("poison needs a command")
		}
		return errHelp
	}
	return usageErrorf("unknown poison command %q", args[0])
}

// peekNote says what a listing through Peek cannot see.
const peekNote = "A listing peeks: it sees at most the first 32 visible envelopes of each poison queue " +
	"(envelopes hidden by a running requeue or purge reappear within 30 s), and changes nothing."

// poisonEntry is one message of a poison queue: an envelope, or a message
// that is not one.
type poisonEntry struct {
	PoisonQueue string `json:"poison_queue"`
	PoisonID    string `json:"poison_id"` // the envelope's own ID in the poison queue
	Kind        string `json:"kind"`      // "poison", or "not-envelope" with Text
	*EnvelopeView
	Text string `json:"text,omitempty"`
	// Others, in poison show, are the poison IDs of the other envelopes
	// of the same message: the other poisoned items of a batch.
	Others []string `json:"others,omitempty"`
}

// poisonListDoc is the result of poison list.
type poisonListDoc struct {
	Target    string        `json:"target"`
	Envelopes []poisonEntry `json:"envelopes"`
	// Depth is the poison queues' approximate depth: invisible messages
	// included, and those a peek cannot reach.
	Depth int      `json:"depth"`
	Full  []string `json:"full_queues"`
	Note  string   `json:"note"`
}

// listPoison peeks at every poison queue of t and reads their depth.
func listPoison(ctx context.Context, t *target) (poisonListDoc, error) {
	doc := poisonListDoc{Target: t.name(), Envelopes: []poisonEntry{}, Note: peekNote}
	var poison azdispatch.Shard
	switch {
	case t.queue != nil:
		poison = t.queue.PoisonQueue()
	case t.sharded != nil:
		poison = t.sharded.PoisonQueue()
	}
	peek := azdispatch.CapabilitiesOf(poison).Peek // a *Queue's or a *ShardedQueue's
	if poison == nil || peek == nil {
		return doc, fmt.Errorf("%s has no poison queue", t.name())
	}
	msgs, perr := peek(ctx, azdispatch.MaxBatch)
	doc.Full = fullQueues(msgs, azdispatch.MaxBatch)
	for _, m := range msgs {
		e := poisonEntry{PoisonQueue: m.Queue, PoisonID: m.ID, Kind: kindPoison}
		if env, err := azdispatch.ParsePoison(m.Text); err == nil {
			e.EnvelopeView = newEnvelopeView(env)
		} else {
			e.Kind, e.Text = kindNotEnvelope, m.Text
		}
		doc.Envelopes = append(doc.Envelopes, e)
	}
	var derrs []error
	for _, u := range t.units() {
		if u.poison == nil {
			continue
		}
		d, err := u.poison.Depth(ctx)
		doc.Depth += d
		derrs = append(derrs, err)
	}
	return doc, errors.Join(perr, errors.Join(derrs...))
}

func runPoisonList(ctx context.Context, c *cli, args []string) error {
	var o common
	fs := c.flagSet("poison list", "poison list (-queue NAME | -base NAME -shards N) [flags]",
		`Lists the envelopes of the poison queue ("<queue>-poison", or one beside each shard):
the original message ID, reason, dequeue count, inserted and poisoned times, batch item
and body. `+peekNote+`
Exits 3 when the poison queues hold anything, so that a script can alert on it.`)
	o.register(fs)
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, err := o.target.open(ctx, c, needQueue)
	if err != nil {
		return err
	}
	if err := t.mustExist(ctx, true); err != nil {
		return err
	}
	doc, lerr := listPoison(ctx, t)
	if lerr != nil && len(doc.Envelopes) == 0 {
		return lerr // nothing to show: an empty table would read as "no poison"
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "ID", "POISON QUEUE", "REASON", "DEQUEUES", "INSERTED", "POISONED", "ITEM", "BODY")
		for _, e := range doc.Envelopes {
			if e.EnvelopeView == nil {
				row(tw, e.PoisonID, e.PoisonQueue, "(not an envelope)", "-", "-", "-", "-", preview(e.Text, 40))
				continue
			}
			item := "-"
			if e.Batch != "" {
				item = fmt.Sprintf("%s/%d", e.Batch, e.Item)
			}
			body := preview(e.Body, 40)
			if e.BodyPointer != nil {
				body = fmt.Sprintf("(pointer to a %d-byte payload)", e.BodyPointer.Size)
			}
			row(tw, e.MessageID, e.PoisonQueue, preview(e.Reason, 50), e.DequeueCount, stamp(e.InsertedAt), stamp(e.PoisonedAt), item, body)
		}
		tw.Flush()
		fmt.Fprintf(tw, "%d shown; about %d in the poison queue(s). %s\n", len(doc.Envelopes), doc.Depth, peekNote)
	}); err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	if len(doc.Envelopes) > 0 || doc.Depth > 0 {
		return errAttention
	}
	return nil
}

func runPoisonShow(ctx context.Context, c *cli, args []string) error {
	var o common
	fs := c.flagSet("poison show", "poison show (-queue NAME | -base NAME -shards N) [flags] ID",
		`Shows one envelope in full, body included. ID is the original message's ID (as poison
list shows it) or the envelope's own ID in the poison queue. `+peekNote)
	o.register(fs)
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("poison show takes one ID")
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, err := o.target.open(ctx, c, needQueue)
	if err != nil {
		return err
	}
	if err := t.mustExist(ctx, true); err != nil {
		return err
	}
	doc, lerr := listPoison(ctx, t)
	for _, e := range doc.Envelopes {
		if e.PoisonID != pos[0] && (e.EnvelopeView == nil || e.MessageID != pos[0]) {
			continue
		}
		// A batch with several items poisoned has an envelope for each,
		// all with the batch message's ID: name the others, so that one
		// shown is not taken for all there is.
		if e.EnvelopeView != nil && e.MessageID != "" {
			for _, other := range doc.Envelopes {
				if other.PoisonID != e.PoisonID && other.EnvelopeView != nil && other.MessageID == e.MessageID && other.Queue == e.Queue {
					e.Others = append(e.Others, other.PoisonID)
				}
			}
		}
		return c.emit(o.json, e, func(tw *tabwriter.Writer) {
			row(tw, "poison queue:", e.PoisonQueue)
			row(tw, "poison id:", e.PoisonID)
			if e.EnvelopeView == nil {
				tw.Flush()
				fmt.Fprintf(c.stdout, "not an envelope; text:\n%s\n", e.Text)
				return
			}
			row(tw, "id:", e.MessageID)
			row(tw, "queue:", e.Queue)
			row(tw, "reason:", oneLine(e.Reason))
			row(tw, "dequeue count:", e.DequeueCount)
			row(tw, "inserted:", stamp(e.InsertedAt))
			row(tw, "poisoned:", stamp(e.PoisonedAt))
			if e.Batch != "" {
				row(tw, "batch item:", fmt.Sprintf("%s/%d", e.Batch, e.Item))
			}
			row(tw, "body kind:", e.BodyKind)
			if e.BodyPointer != nil {
				row(tw, "body payload:", summary(kindPointer, "", e.BodyPointer, nil))
			}
			row(tw, "body bytes:", len(e.Body))
			if len(e.Others) > 0 {
				row(tw, "other envelopes:", fmt.Sprintf("%d of the same message (show them by poison id): %s", len(e.Others), strings.Join(e.Others, " ")))
			}
			tw.Flush()
			// The body goes out as it is, past the tabwriter, which would
			// turn its tabs into padding.
			fmt.Fprintf(c.stdout, "body:\n%s\n", e.Body)
		})
	}
	if lerr != nil {
		return lerr
	}
	return fmt.Errorf("no envelope %q among the first %d visible messages of each poison queue", pos[0], azdispatch.MaxBatch)
}

// selectFlags pick envelopes for requeue and purge.
type selectFlags struct {
	id, reason string
	max        int
}

func (s *selectFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.id, "id", "", "only the envelope of this original message `ID`")
	fs.StringVar(&s.reason, "reason", "", "only envelopes whose reason contains this `text` (case-insensitive)")
	fs.IntVar(&s.max, "max", 0, "at most this many envelopes (0: all)")
}

// check refuses what the flags cannot mean.
func (s *selectFlags) check() error {
	if s.max < 0 {
		return usageErrorf("-max must not be negative")
	}
	return nil
}

// filter is nil when every envelope is selected.
func (s *selectFlags) filter() func(*azdispatch.PoisonEnvelope) bool {
	if s.id == "" && s.reason == "" {
		return nil
	}
	reason := strings.ToLower(s.reason)
	return func(e *azdispatch.PoisonEnvelope) bool {
		return (s.id == "" || e.MessageID == s.id) && strings.Contains(strings.ToLower(e.Reason), reason)
	}
}

func (s *selectFlags) describe() string {
	var parts []string
	if s.id != "" {
		parts = append(parts, fmt.Sprintf("id %q", s.id))
	}
	if s.reason != "" {
		parts = append(parts, fmt.Sprintf("reason containing %q", s.reason))
	}
	if len(parts) == 0 {
		parts = append(parts, "every envelope")
	}
	if s.max > 0 {
		parts = append(parts, fmt.Sprintf("at most %d", s.max))
	}
	return strings.Join(parts, ", ")
}

// requeueDoc is the result of poison requeue.
type requeueDoc struct {
	Target     string `json:"target"`
	Selected   string `json:"selected"`
	Moved      int    `json:"moved"`
	Skipped    int    `json:"skipped"`
	Invalid    int    `json:"invalid"`
	Duplicates int    `json:"duplicates"`
}

func runPoisonRequeue(ctx context.Context, c *cli, args []string) error {
	var o common
	var sel selectFlags
	fs := c.flagSet("poison requeue", "poison requeue (-queue NAME | -base NAME -shards N) [-id ID] [-reason TEXT] [-max N] [-keep-text] [flags]",
		`Moves envelopes back to their queue with their original text (the library's Requeue; on
a sharded set each goes back to its own shard), all of them or those -id and -reason pick,
a text in the library's own format (one with a metadata line, a pointer or a due line)
with the message's ID added to its metadata, so that its envelope names it if it is
poisoned again (-keep-text sends every text byte for byte); a codec's text alone goes
back byte for byte, since other consumers may read it.
Each is sent before it is deleted from the poison queue. Envelopes not picked are received
too, hidden while the requeue runs, and visible again when it ends.`)
	o.register(fs)
	sel.register(fs)
	keepText := fs.Bool("keep-text", false, "send every text back byte for byte, even one in the library's own format, without its earlier ID in its metadata")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := sel.check(); err != nil {
		return err
	}
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	t, err := o.target.open(ctx, c, needQueue)
	if err != nil {
		return err
	}
	if err := t.mustExist(ctx, true); err != nil {
		return err
	}
	opts := &azdispatch.RequeueOptions{Max: sel.max, Filter: sel.filter(), KeepText: *keepText}
	var res azdispatch.RequeueResult
	var rerr error
	if t.sharded != nil {
		res, rerr = t.sharded.Requeue(ctx, opts)
	} else {
		res, rerr = azdispatch.Requeue(ctx, t.queue.PoisonQueue(), t.queue, opts)
	}
	doc := requeueDoc{Target: t.name(), Selected: sel.describe(), Moved: res.Moved, Skipped: res.Skipped, Invalid: res.Invalid, Duplicates: res.Duplicates}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "MOVED", "SKIPPED", "INVALID", "DUPLICATES")
		row(tw, doc.Moved, doc.Skipped, doc.Invalid, doc.Duplicates)
	}); err != nil {
		return errors.Join(err, rerr)
	}
	return rerr
}
