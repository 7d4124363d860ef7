package azdispatch

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch/internal/route"
	"github.com/azdispatch/azdispatch/internal/txcount"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// Middleware wraps every handler call of a listener: single messages and
// batch items alike. It is not generic, so that one middleware (tracing,
// metrics, logging) serves every [Listener][T]. Set it in
// [ListenerOptions.Middleware].
//
// HandleCall runs the rest of the chain, and at its end the handler, by
// calling c.Next, with the context the handler should get (one it derived
// from ctx, or ctx itself); it may do work before and after, and returns
// what becomes the call's result: the handler's error (a panic arrives as a
// [*PanicError]), one of its own, or nil. The listener judges that result as
// it would the handler's: nil deletes, an error retries, [Permanent] poisons.
// A middleware that does not call Next skips the handler. A panic in a
// middleware is recovered and counted like a handler's.
//
// A Middleware that also implements [StorageMiddleware] wraps the listener's
// storage requests for messages as well.
type Middleware interface {
	HandleCall(ctx context.Context, c *Call) error
}

// MiddlewareFunc is a function that is a [Middleware].
type MiddlewareFunc func(ctx context.Context, c *Call) error

// HandleCall calls f.
func (f MiddlewareFunc) HandleCall(ctx context.Context, c *Call) error { return f(ctx, c) }

// Call is one handler call as middleware sees it. Its [MessageInfo]
// describes the message as the handler's [Message] does; it is the
// listener's, valid until [Middleware.HandleCall] returns, and not to be
// changed (except through Body, which the handler then sees).
type Call struct {
	MessageInfo
	// Size is the length in bytes of the text the body was decoded from:
	// for a claim-checked message the text from its blob, for a batch item
	// the item's own, metadata not included.
	Size int
	// Body points at the decoded body: a *T for a [Listener][T]. A
	// middleware may change what it points at (the handler sees the
	// change), not the pointer.
	Body any

	chain   []Middleware
	pos     int
	handler func(ctx context.Context, c *Call) error
	msg     any // the [*Message][T] the handler gets
	call    *handlerCall
}

// Next runs the rest of the chain and then the handler with ctx, and
// returns their result. Call it at most once at a time (calling it again
// after it returned runs the rest again: a retry within the call).
func (c *Call) Next(ctx context.Context) error {
	i := c.pos
	if i == len(c.chain) {
		return c.handler(ctx, c)
	}
	c.pos = i + 1
	defer func() { c.pos = i }()
	return c.chain[i].HandleCall(ctx, c)
}

// runChain runs c through its chain and the handler, turning a panic in a
// middleware into a [*PanicError] as the handler's own is.
func (c *Call) runChain(ctx context.Context) (err error) {
	defer catchPanic(&err)
	c.pos = 0
	return c.Next(ctx)
}

// StorageMiddleware wraps the storage requests a listener makes for
// messages: each receive, delete, release (a retry delay, or visible at
// once at shutdown) and copy to the poison queue, so that tracing can give
// each a span and metrics a duration. Visibility renewals, payload reads and
// checkpoints are not wrapped: the Azure SDK's own HTTP tracing sees them.
// A [Middleware] in [ListenerOptions.Middleware] that implements it is called
// for these too.
//
// HandleStorage makes the request by calling op.Next with the context the
// request should carry, and returns its error (or one of its own).
type StorageMiddleware interface {
	HandleStorage(ctx context.Context, op *StorageOp) error
}

// StorageOp is one storage request a listener makes for messages, as a
// [StorageMiddleware] sees it.
type StorageOp struct {
	// Kind is the request:
	//   - [OpReceive] gets messages: Max asked for, Received what came back;
	//   - [OpDelete] deletes Message: handled, or moved to the poison queue;
	//   - [OpUpdate] releases Message: hidden for After for a retry, or
	//     visible at once (After 0) when it was not handled;
	//   - [OpSend] copies Message (or one item of its batch) to the poison
	//     queue, for Reason; an [OpDelete] follows if it succeeds.
	Kind Op
	// Queue is the queue the request goes to: the message's (for a
	// [ShardedQueue], its shard's, as in [MessageInfo.Queue]), or for [OpReceive] the
	// listener's source.
	Queue string
	// Message is the message settled (nil for [OpReceive]): read it, do not
	// change it.
	Message *Delivery
	// Max is how many messages an [OpReceive] asks for; Received is what it
	// got, set once Next returns. Messages received are handled even when
	// the middleware then returns an error: they are hidden already.
	Max      int
	Received []*Delivery
	// After is how long an [OpUpdate] hides the message for.
	After time.Duration
	// Reason is why an [OpSend] gives up on the message; Item is the batch
	// item it moves alone, or -1 for the whole message.
	Reason string
	Item   int

	chain []StorageMiddleware
	pos   int
	do    func(ctx context.Context, op *StorageOp) error
	// text and origin are an [OpSend]'s envelope and the route to its
	// poison queue.
	text   string
	origin any
}

// Next runs the rest of the chain and then makes the request with ctx.
func (op *StorageOp) Next(ctx context.Context) error {
	i := op.pos
	if i == len(op.chain) {
		return op.do(ctx, op)
	}
	op.pos = i + 1
	defer func() { op.pos = i }()
	return op.chain[i].HandleStorage(ctx, op)
}

// SendMiddleware wraps every send of a [Publisher]: [Publisher.Send],
// [Publisher.SendWith] and its shorthands, and [Publisher.SendBatch]. Set
// it in [PublisherOptions.Middleware].
//
// HandleSend sends by calling s.Next with the context the send should
// carry, and returns its error (or one of its own); before Next it may add
// [Metadata] to carry with the message, after it s.ID and s.Size are set. A
// middleware that does not call Next sends nothing: the send returns what
// the middleware returned, and an empty ID.
type SendMiddleware interface {
	HandleSend(ctx context.Context, s *Outgoing) error
}

// SendMiddlewareFunc is a function that is a [SendMiddleware].
type SendMiddlewareFunc func(ctx context.Context, s *Outgoing) error

// HandleSend calls f.
func (f SendMiddlewareFunc) HandleSend(ctx context.Context, s *Outgoing) error { return f(ctx, s) }

// Outgoing is one send of a [Publisher], as a [SendMiddleware] sees it.
type Outgoing struct {
	Queue string // the target's name
	// Body points at what is sent: a *T for a [Publisher][T]'s Send, a *[]T
	// for its SendBatch. A middleware may change what it points at, not
	// the pointer.
	Body any
	// Items is the number of items of a [Publisher.SendBatch]; 0 for a single message.
	Items int
	// Key is the send's [SendOptions.Key] ("" for none). A middleware may
	// set or change it: the send then takes it as if the option had said
	// so, and fails with a [*ConfigError] if the key cannot be one.
	Key string
	// Delay is the send's [SendOptions.Delay], or what remains until its
	// [SendOptions.At]; 0 for a message sent visible at once.
	Delay time.Duration
	// Metadata goes with the message (see [Metadata]): set entries before
	// calling Next. Nil until something is set.
	Metadata Metadata

	// Set when Next returns nil: the message's ID, the length in bytes of
	// the text put on the queue (the pointer, for an offloaded body), and
	// whether the body went to a payload blob.
	ID        string
	Size      int
	Offloaded bool
	// SentTo is, once Next returns nil, the name of the queue that took
	// the message: the shard a [*ShardedQueue] chose (by key, or round
	// robin with failover), otherwise the target's own; for a
	// [Publisher.SendBatch], its pointer message's. Empty for a [Target]
	// that does not tell.
	SentTo string

	chain   []SendMiddleware
	pos     int
	send    func(ctx context.Context, s *Outgoing) error
	route   route.Route   // how it goes: Delay and Key, which a middleware may change, are taken at the send
	sent    sentMessage   // what the target said of the message
	ownMeta bool          // Metadata is a map Set made for this send
	isBatch bool          // sent with SendBatch
	batch   *wire.Pointer // the pointer a SendBatch sent
}

// Set adds one entry of metadata. The first Set of a send copies a
// [Metadata] map that a middleware assigned, so that a map shared between
// sends is never written to.
func (s *Outgoing) Set(key, value string) {
	if !s.ownMeta {
		m := make(Metadata, len(s.Metadata)+2)
		maps.Copy(m, s.Metadata)
		s.Metadata, s.ownMeta = m, true
	}
	s.Metadata[key] = value
}

// takeRoute sets the send's route to what the middleware left in Delay
// and Key, checked and rounded as the send's own options are: the route
// taken decides the due line, and what a cancel of the message needs.
func (s *Outgoing) takeRoute() error {
	if s.Delay < 0 || s.Delay > wire.MaxAfter {
		return &ConfigError{Field: "Outgoing.Delay", Reason: fmt.Sprintf("%v: a send middleware set it outside 0 to a century", s.Delay)}
	}
	if d := route.UpToSecond(s.Delay); d != s.route.Delay {
		// A delay of its own, not SendAt's time: one the service counts
		// from its insertion, so no line is needed for lack of its clock.
		s.route.Delay, s.route.At, s.route.Line = d, time.Time{}, false
	}
	s.route.Key = s.Key
	return nil
}

// Next runs the rest of the chain and then the send with ctx.
func (s *Outgoing) Next(ctx context.Context) error {
	i := s.pos
	if i == len(s.chain) {
		return s.send(ctx, s)
	}
	s.pos = i + 1
	defer func() { s.pos = i }()
	return s.chain[i].HandleSend(ctx, s)
}

// callChain calls the handler for m through the middleware, if any. Without
// middleware it is the handler call alone: no [Call] is made, nothing is
// allocated, and a message in hand carries no room for one.
func (l *Listener[T]) callChain(c *handlerCall, t *try, m *Message[T], size int) error {
	m.Metadata = t.meta
	if l.mw == nil {
		return l.callRecovering(c, c, m)
	}
	mc := &Call{MessageInfo: m.MessageInfo, Size: size, Body: &m.Body, chain: l.mw, handler: l.invoke, msg: m, call: c}
	return mc.runChain(c)
}

// invokeHandler is the end of every middleware chain: the handler itself.
func (l *Listener[T]) invokeHandler(ctx context.Context, c *Call) error {
	return l.callRecovering(ctx, c.call, c.msg.(*Message[T]))
}

// The listener's storage requests for messages go through these, so that
// a StorageMiddleware sees them; without one they are the source's calls.

func (l *Listener[T]) srcReceive(ctx context.Context, max int) ([]*Delivery, error) {
	if l.storage == nil {
		return l.src.Receive(ctx, max, l.opts.VisibilityTimeout)
	}
	op := &StorageOp{Kind: OpReceive, Max: max, Item: -1}
	err := l.runStorage(ctx, op)
	return op.Received, err
}

func (l *Listener[T]) srcDelete(ctx context.Context, d *Delivery) error {
	if l.storage == nil {
		return l.src.Delete(ctx, d)
	}
	return l.runStorage(ctx, &StorageOp{Kind: OpDelete, Message: d, Item: -1})
}

func (l *Listener[T]) srcRelease(ctx context.Context, d *Delivery, after time.Duration) error {
	if l.storage == nil {
		return l.src.SetVisibility(ctx, d, after)
	}
	return l.runStorage(ctx, &StorageOp{Kind: OpUpdate, Message: d, After: after, Item: -1})
}

// poisonSend puts an envelope's text on the poison queue, routed by origin
// (see sendPoison).
func (l *Listener[T]) poisonSend(ctx context.Context, d *Delivery, env *PoisonEnvelope, text string, origin any) error {
	if l.storage == nil {
		return l.sendEnvelope(ctx, origin, text)
	}
	item := -1
	if env.Batch != "" {
		item = env.Item
	}
	return l.runStorage(ctx, &StorageOp{Kind: OpSend, Message: d, Reason: env.Reason, Item: item, text: text, origin: origin})
}

// runStorage sends op through the storage middleware to the request.
func (l *Listener[T]) runStorage(ctx context.Context, op *StorageOp) error {
	op.Queue, op.chain, op.do = l.src.Name(), l.storage, l.doStorage
	if op.Message != nil {
		op.Queue = op.Message.Queue // the shard, as Call.Queue names it
	}
	return op.Next(ctx)
}

// storageRequest is the end of every storage middleware chain: the request.
func (l *Listener[T]) storageRequest(ctx context.Context, op *StorageOp) error {
	switch op.Kind {
	case OpReceive:
		var err error
		op.Received, err = l.src.Receive(ctx, op.Max, l.opts.VisibilityTimeout)
		return err
	case OpDelete:
		return l.src.Delete(ctx, op.Message)
	case OpUpdate:
		return l.src.SetVisibility(ctx, op.Message, op.After)
	default: // OpSend
		return l.sendEnvelope(ctx, op.origin, op.text)
	}
}

// Metadata is what a publisher carries with a message besides its body:
// string keys and values, such as the W3C trace context ("traceparent",
// "tracestate") that the otelazdispatch package propagates. A Storage queue
// message has no headers, so metadata travels in the message text, as a
// first line (a marker of the format and its version, then a JSON object)
// before the text the codec made. Only messages sent with metadata have the line: a message without
// any is byte for byte what the codec wrote (a delayed one, if sent with
// [PublisherOptions.PlainDelays]), so that a queue shared with
// the Azure Functions queue trigger (which would not understand the line)
// stays readable by it. The line counts against [MaxMessageSize]. Listeners
// of this package accept messages with and without it, and give the
// handler the body alone.
//
// Metadata survives every path a message takes: a claim-checked message or
// a batch carries it on its pointer message (a batch's metadata is its
// items'), a poisoned message keeps it in its envelope's body (a batch item
// poisoned alone gets its batch's), and [Requeue] puts it back.
type Metadata map[string]string

// MetadataKey is the metadata entry that carries a message's key (see
// [SendOptions.Key]); a handler reads it as [MessageInfo.Key]. A publisher
// writes it from the key of the send and drops one found in the metadata it
// is given, so that a handler that forwards its message's metadata does not
// pass the key on.
const MetadataKey = wire.KeyEntry

// MetadataOrder is the metadata entry that carries a keyed message's place
// in its key's order: the publisher's ID, the message's number, and the
// number of the key's message it follows (see [LimitOptions.InOrder]). A
// publisher writes it with [MetadataKey], and drops one found in the
// metadata it is given.
const MetadataOrder = wire.OrderEntry

// MaxKeyLength bounds a message's key, in bytes: it travels in every
// message of the key.
const MaxKeyLength = 512

// ErrBadMetadata means a message's metadata line (see [Metadata]) is
// malformed or too long. A listener poisons such a message with it as the
// reason; a publisher refuses to send metadata that would make one.
var ErrBadMetadata = wire.ErrBadMetadata

// ParseMetadata splits a message text into its metadata and the text the
// codec wrote (or the pointer to it). A text without a metadata line gives
// nil metadata and the text unchanged; a malformed line an error matching
// [ErrBadMetadata]. The metadata line must open the text: that of a
// message sent to be handled later follows its due line, which
// [DescribeText] reads too.
func ParseMetadata(text string) (Metadata, string, error) {
	m, rest, err := wire.CutMeta(text)
	return m.Pairs(), rest, err
}

// line returns the metadata line to put before a message's text: "" when
// there is no metadata. Errors match [ErrBadMetadata].
func (m Metadata) line() (string, error) {
	wm, err := wire.NewMeta(m)
	return wm.Line(), err
}

// Op names a kind of storage request, one way everywhere: the request a
// [StorageError] reports, the request a [StorageMiddleware] wraps
// ([StorageOp.Kind]), and the call a memqueue fault hook fails. Its value
// is the request's name in errors, logs and spans.
type Op string

// The requests for messages, which a [StorageMiddleware] sees and a
// memqueue fault hook may fail.
const (
	OpReceive Op = "receive" // Get Messages
	OpDelete  Op = "delete"  // Delete Message
	// OpUpdate is Update Message: a renewal of a message's visibility, or
	// a release (hidden for a retry delay, or visible again at once).
	OpUpdate Op = "update"
	// OpSend is Put Message: a send, or a copy to the poison queue.
	OpSend  Op = "send"
	OpDepth Op = "depth" // Get Queue Properties, for the approximate depth
)

// The other requests a [StorageError] may name.
const (
	opCreate     Op = "create"      // Create Queue
	opBlobRead   Op = "blob read"   // Get Blob, Get Blob Properties
	opBlobWrite  Op = "blob write"  // Put Blob, Put Block, Append Block, Set Blob Metadata, Create Container
	opBlobDelete Op = "blob delete" // Delete Blob
	opBlobLease  Op = "blob lease"  // Lease Blob
	opBlobList   Op = "blob list"   // List Blobs
	opPeek       Op = "peek"        // Peek Messages, counted in Other
	// opQueueMetadata is Set Queue Metadata (a pause, a resume), counted
	// in Other.
	opQueueMetadata Op = "set queue metadata"
	opOther         Op = "other" // whatever else
)

// counted is where o is counted in a [Transactions].
func (o Op) counted() txcount.Op { return txcount.Named(string(o)) }

// Transactions counts billable storage requests by kind. Every HTTP attempt
// counts, retries included, because the service bills each one.
type Transactions struct {
	Receive      int64 // Get Messages requests, including those that found nothing
	EmptyReceive int64 // of Receive, the calls that returned no message
	Delete       int64 // Delete Message
	Update       int64 // Update Message: visibility renewals and releases
	Send         int64 // Put Message
	Depth        int64 // Get Queue Properties, for the approximate depth
	Create       int64 // Create Queue
	BlobRead     int64 // Get Blob and Get Blob Properties
	BlobWrite    int64 // Put Blob, Put Block, Set Blob Metadata, Create Container
	BlobDelete   int64 // Delete Blob
	BlobLease    int64 // Lease Blob: acquire, renew, release, break
	BlobList     int64 // List Blobs
	Other        int64 // anything else made through the account's clients
}

// Total is the number of billable requests. EmptyReceive is part of Receive
// and is not counted twice.
func (t Transactions) Total() int64 {
	return t.Receive + t.Delete + t.Update + t.Send + t.Depth + t.Create + t.Blob() + t.Other
}

// Blob is the number of blob service requests among them.
func (t Transactions) Blob() int64 {
	return t.BlobRead + t.BlobWrite + t.BlobDelete + t.BlobLease + t.BlobList
}

// counter accumulates [Transactions]: an account's, a queue's, a listener's,
// or one a context carries. It is safe for concurrent use; the zero value
// is ready.
type counter struct{ c txcount.Counter }

func (c *counter) add(o Op) { c.c.Add(o.counted()) }

// snapshot returns the counts so far.
func (c *counter) snapshot() Transactions {
	return Transactions{
		Receive:      c.c.Load(txcount.Receive),
		EmptyReceive: c.c.Empty(),
		Delete:       c.c.Load(txcount.Delete),
		Update:       c.c.Load(txcount.Update),
		Send:         c.c.Load(txcount.Send),
		Depth:        c.c.Load(txcount.Depth),
		Create:       c.c.Load(txcount.Create),
		BlobRead:     c.c.Load(txcount.BlobRead),
		BlobWrite:    c.c.Load(txcount.BlobWrite),
		BlobDelete:   c.c.Load(txcount.BlobDelete),
		BlobLease:    c.c.Load(txcount.BlobLease),
		BlobList:     c.c.Load(txcount.BlobList),
		Other:        c.c.Load(txcount.Other),
	}
}

// CountTransactions returns a copy of ctx in which every storage request
// this package makes is counted (besides the queue's and the account's own
// counts), and so is every call on a memqueue.Queue, and a function that
// returns the counts so far: what a piece of work cost. Contexts nest: an
// inner count does not hide an outer one.
func CountTransactions(ctx context.Context) (context.Context, func() Transactions) {
	c := new(counter)
	return countIn(ctx, c), c.snapshot
}

// countIn returns a copy of ctx whose requests c counts too.
func countIn(ctx context.Context, c *counter) context.Context { return txcount.With(ctx, &c.c) }

// requestTag says what a request is and which queue's counter it belongs to
// (nil for blob requests).
type requestTag struct {
	op    Op
	queue *counter
}

type requestTagKey struct{}

func tagRequest(ctx context.Context, o Op, queue *counter) context.Context {
	return context.WithValue(ctx, requestTagKey{}, requestTag{op: o, queue: queue})
}

// countingPolicy sits in the SDK pipeline's per-retry slot, so it sees every
// HTTP attempt, and counts it in the account's counter, the queue's counter
// and every counter attached to the request's context.
type countingPolicy struct{ account *counter }

func (p countingPolicy) Do(req *policy.Request) (*http.Response, error) {
	ctx := req.Raw().Context()
	o := opOther
	if tag, ok := ctx.Value(requestTagKey{}).(requestTag); ok {
		o = tag.op
		if tag.queue != nil {
			tag.queue.add(o)
		}
	}
	p.account.add(o)
	txcount.Add(ctx, o.counted())
	return req.Next()
}
