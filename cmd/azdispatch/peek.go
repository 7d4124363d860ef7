package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Kinds of message text, as peek and poison show them: the library's (see
// azdispatch.TextKind), and one of a poison queue's.
const (
	kindPlain          = string(azdispatch.TextPlain)          // the text as a publisher sent it
	kindPointer        = string(azdispatch.TextPointer)        // a claim check: the body is in a payload blob
	kindInvalidPointer = string(azdispatch.TextInvalidPointer) // claims to be a pointer but is not a valid one
	kindBadMetadata    = string(azdispatch.TextBadMetadata)    // starts with a metadata line that a listener would refuse
	kindBadDueLine     = string(azdispatch.TextBadDueLine)     // starts with a due line that a listener would refuse
	kindPoison         = string(azdispatch.TextPoison)         // a poison envelope
	kindNotEnvelope    = "not-envelope"                        // in a poison queue, but not an envelope
)

// EnvelopeView is a poison envelope with its body, for output: the
// envelope's header fields as the library names them, and the body, which
// the library's JSON leaves out.
type EnvelopeView struct {
	*azdispatch.PoisonEnvelope
	// Body is the poisoned message's text: for plain text without its due
	// and metadata lines, which BodyMetadata and the envelope's times say.
	Body string `json:"body"`
	// BodyKind says whether the body is the text itself or a pointer to a
	// payload blob (a body too large for a poison message, or a claim check).
	BodyKind    string                     `json:"body_kind"`
	BodyPointer *azdispatch.PayloadPointer `json:"body_pointer,omitempty"`
	// BodyMetadata is what the body carries besides the message (a trace
	// context, say): see azdispatch.Metadata.
	BodyMetadata azdispatch.Metadata `json:"body_metadata,omitempty"`
}

// messageView is one peeked message with its decoded view.
type messageView struct {
	Queue        string                     `json:"queue"`
	ID           string                     `json:"id"`
	DequeueCount int64                      `json:"dequeue_count"`
	InsertedAt   time.Time                  `json:"inserted_at"`
	ExpiresAt    time.Time                  `json:"expires_at"`
	Kind         string                     `json:"kind"`
	Text         string                     `json:"text"`
	Pointer      *azdispatch.PayloadPointer `json:"pointer,omitempty"`
	Poison       *EnvelopeView              `json:"poison,omitempty"`
	// Metadata is what the text carries besides the message (a trace
	// context, say): see azdispatch.Metadata.
	Metadata azdispatch.Metadata `json:"metadata,omitempty"`
	// DueAt is when a message sent to be handled later is due, by the
	// service's clock, if its text says (a delay beyond the service's 7
	// days, or a send at a named time); Hops is how many times a listener
	// received it early and hid it again.
	DueAt *time.Time `json:"due_at,omitempty"`
	Hops  int64      `json:"hops,omitempty"`
}

func newEnvelopeView(e *azdispatch.PoisonEnvelope) *EnvelopeView {
	v := &EnvelopeView{PoisonEnvelope: e, Body: e.Body}
	info := azdispatch.DescribeText(e.Body)
	v.BodyKind, v.BodyPointer, v.BodyMetadata = string(info.Kind), info.Pointer, info.Metadata
	switch info.Kind {
	case azdispatch.TextPoison:
		v.BodyKind = kindPlain // an envelope's body is never read as another envelope
	case azdispatch.TextPlain:
		v.Body = info.Body // the message's own text: its metadata (a key, a trace context) is BodyMetadata
	}
	return v
}

func newMessageView(m *azdispatch.Delivery) messageView {
	v := messageView{Queue: m.Queue, ID: m.ID, DequeueCount: m.DequeueCount, InsertedAt: m.InsertedAt, ExpiresAt: m.ExpiresAt, Text: m.Text}
	info := azdispatch.DescribeText(m.Text)
	if due := info.Due; due != nil {
		at := due.DueAt(m.InsertedAt).UTC()
		v.DueAt, v.Hops = &at, due.Hops
	}
	v.Kind, v.Pointer, v.Metadata = string(info.Kind), info.Pointer, info.Metadata
	if info.Poison != nil {
		v.Poison = newEnvelopeView(info.Poison)
	}
	return v
}

// dueCell is a table cell for when a message is due: "-" for one due
// when sent.
func dueCell(m messageView) string {
	if m.DueAt == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%d hops)", stamp(*m.DueAt), m.Hops)
}

// summary is a table cell's short account of a message text.
func summary(kind string, text string, p *azdispatch.PayloadPointer, e *EnvelopeView) string {
	switch {
	case p != nil:
		return fmt.Sprintf("%s payload, %d item(s), %d bytes in blob %s", p.Kind, p.Items, p.Size, p.Blob)
	case e != nil:
		return "reason " + preview(e.Reason, 40) + ", body " + preview(e.Body, 30)
	case kind == kindInvalidPointer:
		return "invalid pointer " + preview(text, 40)
	case kind == kindBadMetadata:
		return "malformed metadata line " + preview(text, 40)
	case kind == kindBadDueLine:
		return "malformed due line " + preview(text, 40)
	}
	return preview(text, 60)
}

// peekDoc is the peek command's result.
type peekDoc struct {
	Target   string        `json:"target"`
	Limit    int           `json:"limit_per_queue"`
	Messages []messageView `json:"messages"`
	// Full lists the queues that returned as many messages as asked for:
	// they may hold more than a peek can show.
	Full []string `json:"full_queues"`
}

func runPeek(ctx context.Context, c *cli, args []string) error {
	var o common
	var n int
	fs := c.flagSet("peek", "peek (-queue NAME | -base NAME -shards N) [-n N] [flags]",
		`Shows the messages at the front of a queue, or of each shard, without receiving them:
they stay visible and their dequeue counts do not change (the service's Peek Messages).
A peek sees at most 32 messages per queue, and only visible ones: messages being handled
or sent with a delay are not shown. Each text is decoded: a pointer to an offloaded
payload (claim check), a poison envelope, or plain text; a message sent to be handled
later shows when it is due (DUE) and how often a listener hid it again (hops), once it
is visible (due, or between a listener's receive and its hop). One request per queue.`)
	o.register(fs)
	fs.IntVar(&n, "n", azdispatch.MaxBatch, "messages to show per queue, 1 to 32")
	if err := c.parseNoArgs(fs, args); err != nil {
		return err
	}
	if n < 1 || n > azdispatch.MaxBatch {
		return usageErrorf("-n must be 1 to %d", azdispatch.MaxBatch)
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

	var src peekable = t.queue
	if t.sharded != nil {
		src = t.sharded
	}
	msgs, perr := src.Peek(ctx, n)
	doc := peekDoc{Target: t.name(), Limit: n, Messages: make([]messageView, 0, len(msgs)), Full: fullQueues(msgs, n)}
	for _, m := range msgs {
		doc.Messages = append(doc.Messages, newMessageView(m))
	}
	if perr != nil && len(msgs) == 0 {
		return perr
	}
	if err := c.emit(o.json, doc, func(tw *tabwriter.Writer) {
		row(tw, "QUEUE", "ID", "DEQUEUES", "INSERTED", "EXPIRES", "DUE", "KIND", "TEXT")
		for _, m := range doc.Messages {
			row(tw, m.Queue, m.ID, m.DequeueCount, stamp(m.InsertedAt), stamp(m.ExpiresAt), dueCell(m), m.Kind, summary(m.Kind, m.Text, m.Pointer, m.Poison))
		}
		tw.Flush()
		fmt.Fprintf(tw, "%d message(s) shown; a peek sees at most %d visible messages per queue.\n", len(doc.Messages), n)
		for _, q := range doc.Full {
			fmt.Fprintf(tw, "%s may hold more than shown.\n", q)
		}
	}); err != nil {
		return errors.Join(err, perr)
	}
	return perr
}

// fullQueues lists the queues from which a peek of n got n messages.
func fullQueues(msgs []*azdispatch.Delivery, n int) []string {
	count := map[string]int{}
	var order []string
	for _, m := range msgs {
		if count[m.Queue] == 0 {
			order = append(order, m.Queue)
		}
		count[m.Queue]++
	}
	full := []string{}
	for _, q := range order {
		if count[q] >= n {
			full = append(full, q)
		}
	}
	return full
}
