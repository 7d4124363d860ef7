package azdispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/azdispatch/azdispatch/internal/group"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/track"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// A group is a number of messages, its children, sent to any queues and
// handled by any listeners, and a continuation: one more message, sent
// once every child has finished (by the group's [GroupRule]). The group is
// kept in a [PayloadStore] as a few append blobs; a child's finish costs
// one Append Block, and the finish that completes the group finds it so
// without a scan, so that a group costs about one blob request per child
// and four per group besides its messages.
//
// A child's finish is recorded by the listener that handles it, before its
// message is deleted: after its handler succeeded, or after it was copied
// to the poison queue. If that record fails, or the process dies, the
// message comes back and is finished again; a child finished twice counts
// once. The continuation is sent by the listener whose finish completes
// the group, with a once-mark, so that it is handled once even when two
// finishes complete the group at the same moment, or a process died after
// sending it and its child came back.

// GroupRule says when a group's continuation is sent.
type GroupRule int

const (
	// ContinueOnSuccess sends it once every child has succeeded. A
	// poisoned child keeps the group waiting: requeued (see [Requeue]),
	// its success completes the group.
	ContinueOnSuccess GroupRule = iota
	// ContinueOnFinish sends it once every child has succeeded or been
	// poisoned; [GroupOutcome.Failed] counts the poisoned.
	ContinueOnFinish
	// ContinueOnFailure sends it when the first child is poisoned, and
	// never if all succeed (the group's status then says so).
	ContinueOnFailure
)

func (r GroupRule) rule() (group.Rule, error) {
	switch r {
	case ContinueOnSuccess:
		return group.OnSuccess, nil
	case ContinueOnFinish:
		return group.OnFinish, nil
	case ContinueOnFailure:
		return group.OnFailure, nil
	}
	return 0, &ConfigError{Field: "GroupOptions.Rule", Reason: fmt.Sprintf("unknown rule %d", r)}
}

// Continuation is the message a group sends when it completes: made by
// [ContinueWith].
type Continuation struct {
	Queue string // where it goes
	text  string // as the publisher encoded it
	ttl   time.Duration
}

// ContinueWith returns the continuation that sends body as p would, to p's
// target, when a group completes. The body is encoded now; the listener
// that completes the group sends the text as it is, to the queue of that
// name (see [PayloadOptions.Continue]). It lives as p's messages do
// ([PublisherOptions.TTL]; the service's 7 days by default): set p's TTL
// negative for a continuation that may wait longer than that to be
// received, as one whose listeners are stopped for a week would.
func ContinueWith[T any](p *Publisher[T], body T) (Continuation, error) {
	text, err := p.codec.Encode(body)
	if err != nil {
		return Continuation{}, wrapf(err, "encode the continuation")
	}
	// It is sent as it is, never offloaded: refused now rather than when
	// the group completes, where no one could fix it.
	switch {
	case wire.Marked(text):
		return Continuation{}, &ConfigError{Field: "ContinueWith's body", Reason: "its text starts with a prefix the library reserves"}
	case xmltext.Check(text) != nil:
		return Continuation{}, &ConfigError{Field: "ContinueWith's body", Reason: xmltext.Check(text).Error()}
	case len(text) > MaxMessageSize-1024:
		return Continuation{}, &ConfigError{Field: "ContinueWith's body", Reason: fmt.Sprintf("%d bytes: at most %d, to fit a message with its group's outcome", len(text), MaxMessageSize-1024)}
	}
	return Continuation{Queue: p.target.Name(), text: text, ttl: p.policy.TTL}, nil
}

// GroupOptions configures a group. Nil, or a zero field, means the
// documented default.
type GroupOptions struct {
	// ID names the group: 1 to 128 letters, digits, '-', '_' and '.'.
	// Defaults to a random one. A creator that may run again (a handler
	// that starts a group, and is retried) sets its own: a group started
	// again with the same ID, size, rule and continuation is the same
	// group, and one with another gives [ErrGroupExists]. Once its
	// records are swept (see Life), the ID may name a new group, whose
	// continuation is its own; a child of the old group still queued then
	// would count as the new one's.
	ID string
	// Rule says when the continuation is sent. Defaults to
	// [ContinueOnSuccess].
	Rule GroupRule
	// Life is how long the group's records stay after their last write;
	// [Sweep] removes them then. Defaults to 14 days.
	Life time.Duration
}

// ErrGroupExists is matched by the error of [PayloadStore.StartGroup] for
// an ID that names a group with another definition.
var ErrGroupExists = group.ErrExists

// ErrGroupNotFound is matched by the error of [PayloadStore.GroupStatus]
// for a group that does not exist (never started, or swept).
var ErrGroupNotFound = group.ErrNotFound

// Group is a started group: send its children with [SendOptions.Group]
// set to [Group.Child].
type Group struct {
	ID   string
	Size int
	refs func(i int) group.Ref
}

// GroupChild is what makes a send a group's child (see
// [SendOptions.Group]); the zero GroupChild makes it none.
type GroupChild struct{ ref string }

// IsZero reports whether c makes a send no group's child: a [Target] of
// your own refuses the others, as only a [Publisher] sends a child.
func (c GroupChild) IsZero() bool { return c.ref == "" }

// Child returns child i of the group (0 to Size-1). Each index must be
// sent at least once; sending one twice is harmless (it counts once).
func (g *Group) Child(i int) GroupChild {
	if i < 0 || i >= g.Size {
		panic(fmt.Sprintf("azdispatch: child %d of a group of %d", i, g.Size))
	}
	return GroupChild{ref: g.refs(i).String()}
}

// continuationText is a group's continuation as its head keeps it.
type continuationText struct {
	Queue string `json:"q"`
	Text  string `json:"t"`
	// TTL is the continuation's life, as its publisher's messages live;
	// 0 for the service's default.
	TTL time.Duration `json:"l,omitempty"`
}

// StartGroup starts a group of size children (1 to 100,000) whose
// continuation is then. It makes the group's records: one request for up
// to 64 children and a continuation of a few KiB, and one more per 64
// children beyond. The continuation's text must fit in a queue message
// with its group's outcome (about 63 KiB).
func (s *PayloadStore) StartGroup(ctx context.Context, size int, then Continuation, opts *GroupOptions) (*Group, error) {
	var o GroupOptions
	if opts != nil {
		o = *opts
	}
	rule, err := o.Rule.rule()
	if err != nil {
		return nil, err
	}
	if o.ID == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
		o.ID = hex.EncodeToString(b)
	}
	if o.Life == 0 {
		o.Life = 14 * 24 * time.Hour
	}
	if then.Queue == "" {
		return nil, &ConfigError{Field: "then", Reason: "no queue: make it with ContinueWith"}
	}
	if len(then.text) > MaxMessageSize-1024 {
		return nil, &ConfigError{Field: "then", Reason: fmt.Sprintf("a continuation of %d bytes: at most %d, to fit a message with its group's outcome", len(then.text), MaxMessageSize-1024)}
	}
	data, err := json.Marshal(continuationText{Queue: then.Queue, Text: then.text, TTL: then.ttl})
	if err != nil {
		return nil, err
	}
	spec := group.Spec{ID: o.ID, Size: size, Rule: rule, Then: data, Queue: then.Queue, Life: o.Life}
	if err := spec.Check(); err != nil {
		return nil, &ConfigError{Field: "StartGroup", Reason: err.Error()}
	}
	if err := s.groups.Create(ctx, spec); err != nil {
		return nil, wrapf(err, "start group %s", o.ID)
	}
	return &Group{ID: o.ID, Size: size, refs: spec.Refs()}, nil
}

// GroupStatus is a group's progress (see [PayloadStore.GroupStatus]).
type GroupStatus struct {
	ID   string
	Size int
	// Succeeded, Failed and Pending count the children: succeeded,
	// poisoned (and not succeeded since), and not finished yet.
	Succeeded, Failed, Pending int
	// Failures are the first poisoned children (at most 100), with the
	// reasons they were poisoned for.
	Failures []GroupFailure
	// Complete says the group's rule is met: its continuation is sent, or
	// being sent. Outcome is then "succeeded" or "failed".
	Complete bool
	Outcome  string
}

// GroupFailure is a child that was poisoned.
type GroupFailure struct {
	Child  int
	Reason string
}

// GroupStatus reads group id's progress: one blob read, and one more per
// 64 children beyond the first 64.
func (s *PayloadStore) GroupStatus(ctx context.Context, id string) (GroupStatus, error) {
	st, err := s.groups.Status(ctx, id)
	if err != nil {
		return GroupStatus{}, wrapf(err, "group %s", id)
	}
	out := GroupStatus{ID: st.Group, Size: st.Size, Succeeded: st.Succeeded, Failed: st.Failed, Pending: st.Pending,
		Complete: st.Complete, Outcome: string(st.Outcome)}
	for _, c := range st.Failures {
		out.Failures = append(out.Failures, GroupFailure{Child: c.Index, Reason: c.Reason})
	}
	return out, nil
}

// MaxGroupResult is the longest result a group's child may leave (see
// [SetGroupResult]).
const MaxGroupResult = group.MaxResult

// tryKey is the context key a message's handler call answers with its try.
type tryKey struct{}

// SetGroupResult leaves result (at most [MaxGroupResult] bytes) for the
// continuation of the group whose child is being handled with ctx: when
// the handler succeeds, the child's finish records it, and the
// continuation's handler reads every child's with
// [PayloadStore.GroupResults]. A later call replaces an earlier one; a
// message that is no group's child ignores it. It fails for a context
// that is not a message handler's (nor made from one): a [BatchHandler]
// cannot leave results. A result is kept by the finish made on the
// delivery whose handler left it, and kept when the child is recorded again
// later; a child whose finish could not be written at all then, and is
// recorded on its next delivery without a call, leaves none.
func SetGroupResult(ctx context.Context, result []byte) error {
	t, ok := ctx.Value(tryKey{}).(*try)
	switch {
	case !ok:
		return &ConfigError{Field: "SetGroupResult's ctx", Reason: "not a message handler's context"}
	case len(result) > MaxGroupResult:
		return &ConfigError{Field: "SetGroupResult's result", Reason: fmt.Sprintf("%d bytes: at most %d", len(result), MaxGroupResult)}
	}
	r := slices.Clone(result)
	t.result.Store(&r)
	return nil
}

// GroupResults reads the results the children of group id left (see
// [SetGroupResult]), by child index; a child that left none, or failed, is
// not in it. Once the group is complete it is one blob read (its head
// holds them), before, one more per shard of 64 children not complete. At
// most [MaxGroupResult] bytes per child.
func (s *PayloadStore) GroupResults(ctx context.Context, id string) (map[int][]byte, error) {
	out, err := s.groups.Results(ctx, id)
	if err != nil {
		return nil, wrapf(err, "group %s", id)
	}
	return out, nil
}

// GroupOutcome is what a group's continuation says of the group.
type GroupOutcome struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"` // "succeeded" or "failed"
	Size    int    `json:"size"`
	// Succeeded and Failed count the children as the finish that
	// completed the group found them; under ContinueOnFailure, Failed is
	// 1, the child that completed it, and FailedChild says which.
	Succeeded   int    `json:"succeeded"`
	Failed      int    `json:"failed"`
	FailedChild *int   `json:"failedChild,omitempty"`
	Reason      string `json:"reason,omitempty"` // the first failed child's
}

// GroupChildOf returns the ID of the group m is a child of, and its index,
// and false for a message that is no group's child.
func GroupChildOf(m MessageInfo) (id string, child int, ok bool) {
	text, ok := m.Metadata[wire.GroupEntry]
	if !ok {
		return "", 0, false
	}
	r, err := group.ParseRef(text)
	if err != nil {
		return "", 0, false
	}
	return r.Group, r.Index, true
}

// GroupOutcomeOf returns the outcome of the group whose continuation m
// is, and false for any other message.
func GroupOutcomeOf(m MessageInfo) (*GroupOutcome, bool) {
	text, ok := m.Metadata[wire.GroupDoneEntry]
	if !ok {
		return nil, false
	}
	var o GroupOutcome
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return nil, false
	}
	return &o, true
}

// finishGroup records the finish of t's message if it is a group's child
// (failed: poisoned, for reason), and sends the group's continuation if
// this finish completes it. It returns an error only when the message must
// not be deleted yet: its next delivery finishes it again.
func (l *Listener[T]) finishGroup(ctx context.Context, t *try, failed bool, reason string) error {
	ref := t.meta[wire.GroupEntry]
	if ref == "" {
		return nil
	}
	log := l.msgLog(t.d).With("group_ref", ref)
	r, err := group.ParseRef(ref)
	if err != nil {
		log.Warn("the message's group reference cannot be read; its group will not count it", "err", err)
		return nil
	}
	store := l.opts.Payloads.Store
	if store == nil {
		log.Error("a group's child, handled by a listener with no payload store: its group will not count it")
		return nil
	}
	c := group.Child{Failed: failed, Reason: reason}
	if r := t.result.Load(); r != nil && !failed {
		c.Result = *r
	}
	done, err := store.groups.Finish(ctx, r, c)
	switch {
	case errors.Is(err, group.ErrNotFound):
		log.Warn("the message's group is gone (swept, or never started); deleted without counting", "err", err)
		return nil
	case err != nil:
		l.storageFailed(err)
		return wrapf(err, "finish child %d of group %s", r.Index, r.Group)
	case done == nil:
		return nil
	}
	if err := l.continueGroup(ctx, done); err != nil {
		return wrapf(err, "send the continuation of group %s", r.Group)
	}
	if err := store.groups.Continued(ctx, r.Group); err != nil {
		log.Warn("continuation sent; not marked so, a later finish may send it again (its once-mark drops it)", "err", err)
	}
	return nil
}

// continueGroup sends the continuation of the group done completes, with
// its outcome and its once-mark.
func (l *Listener[T]) continueGroup(ctx context.Context, done *group.Done) error {
	var then continuationText
	if err := json.Unmarshal(done.Then, &then); err != nil {
		return fmt.Errorf("%w: the group's continuation: %w", ErrPayloadCorrupt, err)
	}
	out := GroupOutcome{ID: done.Group, Outcome: string(done.Outcome), Size: done.Size, Succeeded: done.Succeeded, Failed: done.Failed}
	for _, c := range done.Children {
		if c.Failed {
			out.FailedChild, out.Reason = &c.Index, c.Reason
			break
		}
	}
	outcome, err := json.Marshal(out)
	if err != nil {
		return err
	}
	meta, err := wire.NewMeta(map[string]string{
		wire.GroupDoneEntry: string(outcome),
		wire.OnceEntry:      recordName(payload.KindOnce, then.Queue, "group\x00"+done.Group+"\x00"+done.Made),
	})
	if err != nil {
		return err
	}
	target, err := l.continuationTarget(then.Queue)
	if err != nil {
		// No retry fixes it: the child is kept, and the listener's state
		// says why (State.Fatal, and FatalTimeout ends Run) until a
		// continuation is sent again.
		if l.health.Fail(opContinuation, err, true, time.Now()) {
			l.alerts().Error("a group's continuation cannot be sent until the listener's options change; the child that completed its group is kept", "err", err)
			l.event(Event{Kind: EventFatal, Err: err})
		}
		return err
	}
	msg := wire.Text{Meta: meta, Body: then.Text}
	var opts *SendOptions
	if then.TTL != 0 {
		opts = &SendOptions{TTL: then.TTL}
	}
	if _, err = target.Send(ctx, msg.Render(), opts); err == nil {
		l.storageSucceeded(opContinuation)
	}
	return err
}

// sendOnly is a [Target] made of a source's send: its own queue, for a
// continuation sent where its children were.
type sendOnly struct {
	name string
	send func(ctx context.Context, text string, opts *SendOptions) (sentMessage, error)
}

func (s sendOnly) Name() string { return s.name }

func (s sendOnly) Send(ctx context.Context, text string, opts *SendOptions) (string, error) {
	m, err := s.send(ctx, text, opts)
	return m.ID, err
}

// opContinuation keys, in a listener's health, the sends of groups'
// continuations whose queue could not be opened.
const opContinuation Op = "group continuation"

// continuationTarget opens the queue a continuation goes to.
func (l *Listener[T]) continuationTarget(name string) (Target, error) {
	if open := l.opts.Payloads.Continue; open != nil {
		return open(name)
	}
	if l.caps.Account != nil {
		if a := l.caps.Account(); a != nil {
			return a.Queue(name)
		}
	}
	if l.caps.send != nil && l.src.Name() == name {
		return sendOnly{name: name, send: l.caps.send}, nil
	}
	return nil, &ConfigError{Field: "ListenerOptions.Payloads.Continue", Reason: fmt.Sprintf("cannot open queue %q for a group's continuation: set it", name)}
}

// A tracked message (see [SendOptions.Track]) has one record in the
// payload store, written as it is sent (pending), then by the listeners
// that handle it: delivered before its handler is called, failed after a
// try that failed, and, before its message is deleted, succeeded or
// poisoned; a cancel that succeeds writes cancelled. No write moves it out
// of a final state, so a slow process or a redelivery that writes late
// changes nothing. A send costs one blob request more, a delivery two, a
// failed try two and the end two.

// trackLife is how long a tracked message's record stays after its last
// write; [Sweep] removes it then.
const trackLife = 14 * 24 * time.Hour

// ErrStatusNotFound is matched by the error of [PayloadStore.MessageStatus]
// for a token that names no record (not tracked, or swept).
var ErrStatusNotFound = track.ErrNotFound

// MessageStatus is what became of a tracked message.
type MessageStatus struct {
	Token string
	// State is "pending" (sent, not delivered yet), "delivered" (a handler
	// has it), "failed" (its last try failed; it is tried again),
	// "succeeded", "poisoned" or "cancelled". Final says it is one of the
	// last three, which never change.
	State string
	Final bool
	Queue string
	// MessageID is the message's ID once delivered.
	MessageID string
	// Tries counts its deliveries so far; Reason is why the last try
	// failed, or why it was poisoned.
	Tries  int
	Reason string
	// Updated is its last change, by the service's clock.
	Updated time.Time
}

func (s *PayloadStore) tracker() *track.Store { return track.New(s.records, trackLife) }

// MessageStatus reads the status of the message sent with token (see
// [Sent.StatusToken]): one blob read. A token that is not one is
// [ErrStatusNotFound], like one never tracked.
func (s *PayloadStore) MessageStatus(ctx context.Context, token string) (MessageStatus, error) {
	st, err := s.tracker().Read(ctx, token)
	if err != nil {
		return MessageStatus{}, wrapf(err, "status %.40s", token)
	}
	return MessageStatus{Token: token, State: string(st.State), Final: st.State.Final(), Queue: st.Queue,
		MessageID: st.Message, Tries: st.Tries, Reason: st.Reason, Updated: st.Updated}, nil
}

// track starts a tracked send's record, and returns its token.
func (p *Publisher[T]) track(ctx context.Context) (string, error) {
	token := track.NewToken()
	if err := p.store.tracker().Start(ctx, token, p.target.Name()); err != nil {
		return "", wrapf(err, "track the message")
	}
	return token, nil
}

// trackCancelled records a tracked message cancelled.
func (p *Publisher[T]) trackCancelled(ctx context.Context, c cancelToken) error {
	if c.Track == "" {
		return nil
	}
	return p.store.tracker().Move(ctx, c.Track, track.Status{State: track.Cancelled})
}

// trackToken is t's message's status token, if it is tracked and this
// listener can record it.
func (l *Listener[T]) trackToken(t *try) string {
	token := t.meta[wire.TrackEntry]
	if token == "" || l.opts.Payloads.Store == nil || !track.ValidToken(token) {
		return ""
	}
	return token
}

// markDelivered records a tracked message delivered, before its handler
// is called. A failure is only logged: the handler runs all the same, and
// a later write says more.
func (l *Listener[T]) markDelivered(h *inHand[T]) (action, bool) {
	t := &h.t
	if token := l.trackToken(t); token != "" {
		st := track.Status{State: track.Delivered, Message: t.d.ID, Tries: int(t.d.DequeueCount)}
		if err := l.opts.Payloads.Store.tracker().Move(t.context(), token, st); err != nil {
			l.storageFailed(err)
			l.msgLog(t.d).Warn("could not record the tracked message delivered", "err", err)
		}
	}
	return action{}, false
}

// trackMove moves a tracked message's status; best says a failure is only
// logged. It returns an error when the message must not be deleted yet
// (its end could not be recorded).
func (l *Listener[T]) trackMove(ctx context.Context, t *try, st track.State, reason string, best bool) error {
	token := l.trackToken(t)
	if token == "" {
		return nil
	}
	err := l.opts.Payloads.Store.tracker().Move(ctx, token, track.Status{State: st, Message: t.d.ID, Tries: int(t.d.DequeueCount), Reason: reason})
	if err == nil {
		return nil
	}
	l.storageFailed(err)
	if best {
		l.msgLog(t.d).Warn("could not record the tracked message "+string(st), "err", err)
		return nil
	}
	return wrapf(err, "record the tracked message %s", st)
}
