package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// Peek returns up to max (1 to [MaxBatch]) visible messages from the front of
// the queue without receiving them: they stay visible, keep their dequeue
// count, and no pop receipt is issued (the service's Peek Messages). Hidden
// messages (received and not yet settled, or sent with a delay) are not
// seen. A queue that does not exist has nothing to peek: Peek returns no
// messages and no error, as [Queue.Depth] returns 0. A peeked message is a
// [Delivery] with no Receipt and no NextVisibleAt: it cannot be deleted or
// hidden through it, and its DequeueCount is how often it has been
// received (a peek does not add to it). Its ReceivedAt is the peek
// answer's Date.
//
// A peek is a billable request like any other; it is counted in
// [Transactions.Other], since it is neither a receive (it hides nothing) nor a
// read of the queue's properties.
func (q *Queue) Peek(ctx context.Context, max int) ([]*Delivery, error) {
	if err := checkCount("Peek's max", max); err != nil {
		return nil, err
	}
	resp, err := q.client.PeekMessages(tagRequest(ctx, opPeek, q.tx), &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(max))})
	if err != nil {
		if queueerror.HasCode(err, queueerror.QueueNotFound) {
			return nil, nil
		}
		return nil, storageError(opPeek, q.name, err)
	}
	out := make([]*Delivery, 0, len(resp.Messages))
	for _, m := range resp.Messages {
		if m == nil || m.MessageID == nil {
			continue // malformed response entry
		}
		out = append(out, &Delivery{
			ID:           *m.MessageID,
			Text:         deref(m.MessageText),
			DequeueCount: deref(m.DequeueCount),
			InsertedAt:   deref(m.InsertionTime),
			ExpiresAt:    deref(m.ExpirationTime),
			ReceivedAt:   deref(resp.Date),
			Queue:        q.name,
		})
	}
	return out, nil
}

// peeker is a shard that can peek, as a [*Queue] can.
type peeker interface {
	Peek(ctx context.Context, max int) ([]*Delivery, error)
}

// Peek returns up to max (1 to [MaxBatch]) visible messages from the front of
// each shard of this view, asked in parallel, in shard order (see
// [Queue.Peek]): up to max times the number of shards in all. It goes on past
// shards that fail or cannot peek (a shard of your own without a Peek
// method), and returns what the others hold with the failures joined.
// Shards backed off after failures are asked too: a peek is an operator's
// look, and should show what is there rather than what the sharded queue
// thinks of its shards.
func (s *ShardedQueue) Peek(ctx context.Context, max int) ([]*Delivery, error) {
	if err := checkCount("Peek's max", max); err != nil {
		return nil, err
	}
	got := make([][]*Delivery, len(s.members))
	err := s.eachPeeker(ctx, func(ctx context.Context, k int, p peeker) (err error) {
		got[k], err = p.Peek(ctx, max)
		return err
	})
	var out []*Delivery
	for _, msgs := range got {
		out = append(out, msgs...)
	}
	return out, err
}

// eachPeeker calls f, in parallel, with each shard of the view that can
// peek and its place in the view, and returns the failures joined, each
// naming its shard (a shard that cannot peek is one).
func (s *ShardedQueue) eachPeeker(ctx context.Context, f func(ctx context.Context, k int, p peeker) error) error {
	errs := make([]error, len(s.members))
	var wg sync.WaitGroup
	for k, i := range s.members {
		sh := s.set.shards[i]
		p, ok := s.set.caps[i].peeker()
		if !ok {
			errs[k] = fmt.Errorf("shard %q: cannot peek", sh.Name())
			continue
		}
		wg.Go(func() {
			// Bounded like any request to a shard, so that one that does
			// not answer fails the look within seconds rather than hold it.
			err := s.set.try(ctx, i, MaxBatch*serviceMessageLimit, false, func(ctx context.Context) error { return f(ctx, k, p) })
			if err != nil && !errors.Is(err, errNoAnswer) {
				err = fmt.Errorf("shard %q: %w", sh.Name(), err)
			}
			errs[k] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// OldestAge returns how long the oldest of the messages at the front of
// src has been visible, by the service's clock: from its insertion, or its
// due time if it was sent for later (as [MessageInfo.TimeInQueue] counts), to
// the Date of the answer, in whole seconds; 0 for an empty queue, or one
// that does not exist. src is a [*Queue], a [*ShardedQueue] (the oldest
// over every shard of the view, asked in parallel), or any source with a
// Peek method like theirs (a memqueue.Queue).
//
// It costs one Peek Messages request per queue, of up to 32 messages (the
// most a peek returns, and no more billable than one: only the answer is
// larger). The service keeps no strict order, so the oldest message is
// usually among the front ones but need not be: this is an approximation,
// good for alerts and scaling, not an exact maximum. Hidden messages (being
// handled, waiting for a retry) are not seen, so a queue whose old messages
// all fail and wait for retries reads younger than it is; a delayed
// message received early and hidden again may sit at the front until it
// is hidden, aged 0, which is why more than one message is looked at. A shard that cannot be read
// fails the whole reading (with every shard's error joined): a maximum that
// skipped a shard could be falsely low.
func OldestAge(ctx context.Context, src Source) (time.Duration, error) {
	f, err := ReadFront(ctx, src)
	return f.OldestAge, err
}

// Front is what one look at the front of a queue tells (see [ReadFront]).
type Front struct {
	// OldestAge is the age of the oldest message seen, as [OldestAge]
	// gives it.
	OldestAge time.Duration
	// Visible counts the messages seen: up to 32 per queue. Unless Full,
	// that is every message visible now: the work waiting to be received,
	// which neither messages sent for later nor those in handlers (both
	// hidden) are part of.
	Visible int
	// Full is set when a queue (a shard) had 32 to show: more may be
	// visible than Visible counts.
	Full bool
}

// ReadFront looks at the front of src as [OldestAge] does (one Peek
// Messages request per queue, of up to 32), and returns the age of the
// oldest message and how many were visible: the work due now, which the
// approximate depth cannot tell from messages sent for later. An
// autoscaler counts the work waiting by it (as KEDA's "visibleonly"
// strategy for Azure queues does): the visible messages when fewer than 32
// are, and the depth otherwise. A shard that cannot be read fails the
// whole reading.
func ReadFront(ctx context.Context, src Source) (Front, error) {
	caps := CapabilitiesOf(src)
	if caps.front != nil {
		return caps.front(ctx)
	}
	p, ok := caps.peeker()
	if !ok {
		return Front{}, &ConfigError{Field: "source", Reason: fmt.Sprintf("%q cannot peek: its front is read with a Peek method", src.Name())}
	}
	f, err := readFront(ctx, p)
	if err != nil {
		return Front{}, wrapf(err, "front of %s", src.Name())
	}
	return f, nil
}

// readFront is the front of one queue.
func readFront(ctx context.Context, p peeker) (Front, error) {
	front, err := p.Peek(ctx, MaxBatch)
	if err != nil {
		return Front{}, err
	}
	f := Front{Visible: len(front), Full: len(front) >= MaxBatch}
	var oldest time.Duration
	for _, d := range front {
		if d.InsertedAt.IsZero() {
			continue
		}
		due, _, err := wire.CutDue(d.Text)
		if err != nil {
			due = nil // malformed: aged from its insertion
		}
		peeked := d.ReceivedAt
		if peeked.IsZero() { // a source of one's own that does not say
			peeked = time.Now()
		}
		oldest = max(oldest, timeInQueue(d, due, peeked))
	}
	f.OldestAge = oldest
	return f, nil
}

// readFront is [ReadFront] over every shard of the view.
func (s *ShardedQueue) readFront(ctx context.Context) (Front, error) {
	fronts := make([]Front, len(s.members))
	err := s.eachPeeker(ctx, func(ctx context.Context, k int, p peeker) (err error) {
		fronts[k], err = readFront(ctx, p)
		return err
	})
	if err != nil {
		return Front{}, wrapf(err, "front of %s", s.Name())
	}
	var all Front
	for _, f := range fronts {
		all.OldestAge = max(all.OldestAge, f.OldestAge)
		all.Visible += f.Visible
		all.Full = all.Full || f.Full
	}
	return all, nil
}

// TextKind says what a message text is, as [DescribeText] reads it.
type TextKind string

// Kinds of message text.
const (
	// TextPlain is the text a codec wrote, perhaps after a due line and a
	// metadata line.
	TextPlain TextKind = "plain"
	// TextPointer stands for a payload in a blob: a claim-checked message
	// or a batch (see [TextInfo.Pointer]).
	TextPointer TextKind = "pointer"
	// TextInvalidPointer claims to be a pointer but is not a valid one: a
	// listener poisons it.
	TextInvalidPointer TextKind = "invalid-pointer"
	// TextBadMetadata starts with a metadata line that a listener refuses
	// (see [ErrBadMetadata]).
	TextBadMetadata TextKind = "bad-metadata"
	// TextBadDueLine starts with a due line that a listener refuses.
	TextBadDueLine TextKind = "bad-due-line"
	// TextPoison is a poison envelope (see [TextInfo.Poison]).
	TextPoison TextKind = "poison"
)

// TextInfo is what [DescribeText] tells of a message text.
type TextInfo struct {
	Kind TextKind
	// Due says when a message sent to be handled later is due; nil for
	// one due when sent.
	Due *DueInfo
	// Metadata is what the text carries besides the message (a trace
	// context, say); nil for none.
	Metadata Metadata
	// Pointer names the payload blob of a TextPointer.
	Pointer *PayloadPointer
	// Poison is the envelope of a TextPoison, its body included.
	Poison *PoisonEnvelope
	// Body is the text after its due and metadata lines: the codec's text
	// (or a poison envelope's whole text). For a malformed text, it is the
	// text from the part that is malformed on; "" for a TextPointer.
	Body string
	// Problem says why a text of a malformed kind is refused; "" otherwise.
	Problem string
	// Reserved reports whether the text starts as a due line, a metadata
	// line or a pointer does. A [Publisher] offloads a body that does (it
	// needs a payload store for it), so that no listener mistakes it for one.
	Reserved bool
}

// DueInfo is the due line of a message sent to be handled later: when it
// is due, and how often a listener received it early and hid it again.
type DueInfo struct {
	// At is the due time the sender named; zero if After says it instead.
	At time.Time
	// After is the due time as a delay from the message's insertion,
	// counted on the service's clock.
	After time.Duration
	// Hops counts the times a listener hid the message again because it
	// was not due yet.
	Hops int64
	// Occurrence is the occurrence of a schedule a [Scheduler] sent the
	// message for; nil if none did.
	Occurrence *Occurrence
}

// DueAt is when the message is due, for one the service inserted at
// inserted (see [Delivery.InsertedAt]).
func (d *DueInfo) DueAt(inserted time.Time) time.Time {
	if !d.At.IsZero() {
		return d.At
	}
	return inserted.Add(d.After)
}

// PayloadPointer is the text of a message whose payload is in a blob of a
// [PayloadStore]: a claim-checked message or a batch. Its JSON is the
// pointer's own.
type PayloadPointer struct {
	Kind   string `json:"kind"`   // "single" (a claim check) or "batch"
	Blob   string `json:"blob"`   // the blob's name in the payload container
	Size   int64  `json:"size"`   // bytes of the blob as stored (gzip)
	SHA256 string `json:"sha256"` // of the blob's bytes, lowercase hex
	Items  int    `json:"items"`  // 1 for a single payload
	// Container is the container the blob was written to, if the pointer
	// says; Expanded is the payload's size once decompressed, if it says.
	Container string `json:"container,omitempty"`
	Expanded  int64  `json:"expanded_size,omitempty"`
}

// DescribeText tells what a message text is, for a person or a tool that
// shows it (a peek, a poison queue's view): its kind, its due line, its
// metadata, the payload blob a pointer names, or the envelope of a poison
// queue's message. It makes no request, and reads a pointer by its format
// alone: one beyond a listener's [PayloadLimits] is still a pointer.
func DescribeText(text string) TextInfo {
	msg, err := wire.Parse(text, wire.Limits{})
	info := TextInfo{Kind: TextPlain, Metadata: msg.Meta.Pairs(), Body: msg.Body, Reserved: wire.Marked(text)}
	if d := msg.Due; d != nil {
		info.Due = &DueInfo{At: d.At, After: time.Duration(d.After) * time.Second, Hops: d.Hops}
		if d.Occ != nil {
			info.Due.Occurrence = occurrenceOf(d.Occ)
		}
	}
	if err != nil {
		info.Problem = err.Error()
	}
	switch {
	case errors.Is(err, wire.ErrBadDueLine):
		info.Kind = TextBadDueLine
	case errors.Is(err, wire.ErrBadMetadata):
		info.Kind = TextBadMetadata
	case err != nil:
		info.Kind = TextInvalidPointer
	case msg.Pointer != nil:
		p := msg.Pointer
		info.Kind, info.Pointer = TextPointer, &PayloadPointer{Kind: p.Kind, Blob: p.Blob, Size: p.Size, SHA256: p.SHA256,
			Items: p.Items, Container: p.Container, Expanded: p.Expanded}
	case msg.Meta.Line() == "":
		if env, err := ParsePoison(msg.Body); err == nil {
			info.Kind, info.Poison = TextPoison, env
		}
	}
	return info
}
