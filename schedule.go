package azdispatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// Sent is a message a [Publisher] sent with [Publisher.SendWith],
// [Publisher.SendAfter] or [Publisher.SendAt].
type Sent struct {
	ID string // the message's ID
	// Due is when a listener may first handle it, on the service's clock,
	// to the second: its insertion time for a message visible at once.
	Due time.Time
	// Token is what [Publisher.Cancel] needs to cancel the message: safe to
	// store (in a database, say) and to use from another process. It holds
	// no secret (a cancel still needs the queue's credentials). Empty if
	// the target cannot tell what a cancel needs (a [Target] of your own,
	// a memqueue.Queue).
	Token string
}

// SendWith is [Publisher.Send] with per-send options:
//   - [SendOptions.Delay] or [SendOptions.At]: handled no sooner than then,
//     by the service's clock, however far ahead (see [Publisher.SendAfter]);
//   - [SendOptions.TTL]: the message's life, instead of [PublisherOptions.TTL];
//   - [SendOptions.UniqueKey]: a second send with the same key within
//     [SendOptions.UniqueFor] fails with [ErrDuplicate], across processes
//     and machines. The key is held by a blob in the payload store (one
//     conditional write, If-None-Match: *), released if the send fails, and
//     taken over once its window has passed on the service's clock;
//     [Sweep] removes expired keys. A send whose answer was lost after the
//     service took the message releases its key too: a retry may then send
//     it twice, as with any send (delivery is at least once).
//
// It returns what [Publisher.Cancel] needs.
func (p *Publisher[T]) SendWith(ctx context.Context, body T, opts *SendOptions) (Sent, error) {
	var o SendOptions
	if opts != nil {
		o = *opts
	}
	r, err := p.routeFor(o)
	if err != nil {
		return Sent{}, err
	}
	var m sentMessage
	err = p.unique(ctx, o, func() error {
		m, err = p.publish(ctx, body, r)
		return err
	})
	if err != nil {
		return Sent{}, err
	}
	return p.sent(m, r), nil
}

// unique runs send under o's unique key, if it has one: the key is taken
// first, and given back if send fails.
func (p *Publisher[T]) unique(ctx context.Context, o SendOptions, send func() error) error {
	if o.UniqueKey == "" {
		return send()
	}
	release, err := p.claimKey(ctx, o.UniqueKey, o.UniqueFor)
	if err != nil {
		return err
	}
	if err := send(); err != nil {
		release()
		return err
	}
	return nil
}

// SendAfter is [Publisher.SendWith] with [SendOptions.Delay]: the message
// is handled no sooner than delay from now (rounded up to whole seconds),
// counted on the service's clock.
//
// A delay up to [MaxVisibility] (7 days) is the service's own: the message is
// sent hidden for it, and its text is what [Publisher.Send] would send. A
// longer one, of any length, is recorded in the message's text (a line
// before the body, relative to the service's insertion time), and the
// message is sent hidden for 7 days; a listener that receives it before it
// is due hides it again, for what remains or 7 days, without running the
// handler: one Update Message a week while it waits, riding on a receive the
// listener makes anyway, and nothing else (no table, no poller). Those hops
// are not tries: they never count towards [ListenerOptions.MaxDequeueCount],
// and the handler's [Message.DequeueCount] counts only real deliveries.
// Listeners must be of this version or later to read such a message (an
// earlier one poisons it as undecodable): upgrade listeners first.
//
// A message with a due line lives its TTL past its due time (see
// [PublisherOptions.TTL]), and so does its payload blob, if offloaded.
func (p *Publisher[T]) SendAfter(ctx context.Context, body T, delay time.Duration) (Sent, error) {
	return p.SendWith(ctx, body, &SendOptions{Delay: delay})
}

// SendAt is [Publisher.SendWith] with [SendOptions.At]: the message is
// handled no sooner than at (rounded up to a whole second) by the service's
// clock, however far ahead; a time already past sends it visible at once.
// The publisher hides it for the time that remains by its knowledge of the
// service's clock (see [Queue.ServiceTime]), not by its own; beyond 7 days
// the time is recorded in the message's text, as for
// [Publisher.SendAfter], whose notes on hops, TTL and upgrades apply.
func (p *Publisher[T]) SendAt(ctx context.Context, body T, at time.Time) (Sent, error) {
	if at.IsZero() {
		return Sent{}, &ConfigError{Field: "SendAt's time", Reason: "zero"}
	}
	return p.SendWith(ctx, body, &SendOptions{At: at})
}

// routeFor checks a send's options before anything is written (a large
// body's blob, a unique key) and says how the message goes.
func (p *Publisher[T]) routeFor(o SendOptions) (route, error) {
	switch {
	case o.Delay < 0:
		return route{}, &ConfigError{Field: "SendOptions.Delay", Reason: fmt.Sprintf("%v is negative", o.Delay)}
	case o.Delay > 0 && !o.At.IsZero():
		return route{}, &ConfigError{Field: "SendOptions.At", Reason: "set with Delay: give one"}
	case o.UniqueKey == "" && o.UniqueFor != 0:
		return route{}, &ConfigError{Field: "SendOptions.UniqueFor", Reason: "set without UniqueKey"}
	case o.UniqueKey != "" && o.UniqueFor <= 0:
		return route{}, &ConfigError{Field: "SendOptions.UniqueFor", Reason: fmt.Sprintf("%v: a unique key needs a window", o.UniqueFor)}
	case o.UniqueKey != "" && p.store == nil:
		return route{}, fmt.Errorf("azdispatch: a unique send keeps its key in the payload store: %w", p.noStore())
	}
	r := route{delay: time.Duration(seconds(o.Delay)) * time.Second, ttl: o.TTL, ownTTL: o.TTL != 0}
	if !o.At.IsZero() {
		at := o.At.UTC()
		if t := at.Truncate(time.Second); !t.Equal(at) {
			at = t.Add(time.Second)
		}
		r.at = at
		r.delay = 0
		if wait := at.Sub(serviceTime(p.target)); wait > 0 {
			r.delay = time.Duration(seconds(wait)) * time.Second
		}
	}
	return r, nil
}

// sent describes a message sent as r says to a caller.
func (p *Publisher[T]) sent(m sentMessage, r route) Sent {
	s := Sent{ID: m.ID, Due: r.at}
	if s.Due.IsZero() {
		inserted := m.Inserted
		if inserted.IsZero() { // a Target of your own: the best guess
			inserted = serviceTime(p.target).Truncate(time.Second)
		}
		s.Due = inserted.Add(r.delay).UTC()
	}
	if m.Receipt != "" {
		s.Token = cancelToken{
			Queue: m.Queue, ID: m.ID, Receipt: m.Receipt, Due: s.Due.Unix(),
			Hops: p.dueLine(r) != "", Blob: m.Blob, Expires: p.expires(r, s.Due),
		}.encode()
	}
	return s
}

// cancelToken is what [Sent.Token] holds: where the message is, the pop
// receipt that deletes it until a listener first receives it, and what a
// cancel must know of it.
type cancelToken struct {
	Queue   string `json:"q"`
	ID      string `json:"i"`
	Receipt string `json:"r"`
	Due     int64  `json:"d"`           // Unix seconds, the service's clock
	Hops    bool   `json:"h,omitempty"` // it has a due line: listeners may hide it again
	Blob    string `json:"b,omitempty"` // its payload blob, if offloaded
	Expires int64  `json:"x,omitempty"` // Unix seconds; 0: never
}

// maxCancelToken bounds a token a cancel parses: a real one is about 300
// bytes.
const maxCancelToken = 1024

func (c cancelToken) encode() string {
	b, _ := json.Marshal(c) // strings and numbers always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCancelToken(s string) (cancelToken, error) {
	bad := func(why string) error { return &ConfigError{Field: "Cancel's token", Reason: why} }
	var c cancelToken
	if len(s) > maxCancelToken {
		return c, bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, bad("not a token from Sent.Token")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Queue == "" || c.ID == "" || c.Receipt == "" {
		return c, bad("not a token from Sent.Token")
	}
	if c.Blob != "" && !payload.IsLowerHex(c.Blob, payload.BlobIDLen) {
		return c, bad("its payload blob is not a blob id")
	}
	return c, nil
}

// Cancel makes sure the handler never runs for a message sent with
// [Publisher.SendWith], [Publisher.SendAfter] or [Publisher.SendAt], at any time
// before a listener receives it to handle: token is its [Sent.Token]. It
// fails with an error matching [ErrAlreadyDelivered] if a listener has it
// already (or it is gone: deleted, expired, or cleared by someone else),
// and [ErrAlreadyCancelled] if it was cancelled before.
//
// While the message is in the hidden period of its send, a cancel deletes
// it with the send's pop receipt and deletes its payload blob, if any. A
// message with a due line (due beyond 7 days) that a listener has hidden
// again since cannot be deleted so: a cancel then writes a cancel record
// to the payload store, and the listener that receives the message when it
// is due finds the record and deletes the message, its blob and the record
// without running the handler. Both cost two requests: the delete or its
// attempt, and the record, written in either case so that a second cancel
// can tell what became of the message. A record left after a delete
// expires at the message's due time, [Sweep] removes it after.
//
// A message never cancelled pays nothing for this, unless it has a due
// line: the listener that receives it when due then writes a delivered
// record (one conditional write, If-None-Match: *), so that a cancel and
// a delivery at the same moment cannot both win; the record lives as long as
// the message could, and [Sweep] removes it after.
//
// Cancel needs the publisher's target to be a [*Queue] or a [ShardedQueue]
// (whose shard the token names), and a payload store for a message that is
// no longer in its send's hidden period.
func (p *Publisher[T]) Cancel(ctx context.Context, token string) error {
	c, err := parseCancelToken(token)
	if err != nil {
		return err
	}
	q := p.queueNamed(c.Queue)
	if q == nil {
		return &ConfigError{Field: "Cancel's token", Reason: fmt.Sprintf("names queue %q, which is not %s or one of its shards", c.Queue, p.target.Name())}
	}
	due := time.Unix(c.Due, 0)
	err = q.Delete(ctx, &Delivery{ID: c.ID, Queue: q.name, Receipt: &popReceipt{queue: q, value: c.Receipt}})
	switch {
	case err == nil:
		// Gone before anyone received it. The record says so to a second
		// cancel until the message would have been due.
		if p.store != nil {
			_, _ = p.store.createRecord(ctx, cancelRecord(c.Queue, c.ID), p.recordMeta(payload.KindCancel, payload.StateCancelled, due))
			if c.Blob != "" {
				_ = p.store.remove(ctx, c.Blob)
			}
		}
		return nil
	case !errors.Is(err, ErrOwnershipLost):
		return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, err)
	case p.store == nil:
		if c.Hops {
			return fmt.Errorf("azdispatch: cancel %s: it was received since its send and may have been hidden again; a cancel record needs a payload store: %w", c.ID, p.noStore())
		}
		return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, ErrAlreadyDelivered)
	}
	// Received since its send: hidden again (only a message with a due
	// line is), delivered, or cancelled before. The record decides.
	name := cancelRecord(c.Queue, c.ID)
	expires := time.Time{}
	if c.Expires != 0 {
		expires = time.Unix(c.Expires, 0)
	}
	created, err := p.store.createRecord(ctx, name, p.recordMeta(payload.KindCancel, payload.StateCancelled, expires))
	if err != nil {
		return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, err)
	}
	if created {
		if c.Hops {
			return nil // the listener finds the record when it is due
		}
		// Without a due line, a receive was its delivery.
		_ = p.store.remove(ctx, name)
		return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, ErrAlreadyDelivered)
	}
	rec, err := p.store.readRecord(ctx, name)
	if err != nil {
		return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, err)
	}
	if rec.meta.State == payload.StateCancelled {
		return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, ErrAlreadyCancelled)
	}
	return fmt.Errorf("azdispatch: cancel %s: %w", c.ID, ErrAlreadyDelivered)
}

// queueNamed is the publisher's target, or its shard, called name, if it
// is a [*Queue].
func (p *Publisher[T]) queueNamed(name string) *Queue {
	switch t := p.target.(type) {
	case *Queue:
		if t.name == name {
			return t
		}
	case *ShardedQueue:
		for _, sh := range t.set.shards {
			if q, ok := sh.(*Queue); ok && q.name == name {
				return q
			}
		}
	}
	return nil
}

// recordMeta is the metadata of a record the publisher writes, expiring at
// expires (never, if zero).
func (p *Publisher[T]) recordMeta(kind, state string, expires time.Time) payload.Meta {
	now := time.Now()
	m := payload.Meta{Kind: kind, State: state, Queue: p.target.Name(), Created: now}
	if !expires.IsZero() {
		// Relative to now on this clock, which Sweep measures from the
		// record's write on the service's (see sweepDue).
		m.Expires = now.Add(max(time.Until(expires), 0))
	}
	return m
}

// claimKey takes a unique send's key for window, or fails with
// [ErrDuplicate] if a send within its window holds it. release gives it
// back (for a send that failed).
func (p *Publisher[T]) claimKey(ctx context.Context, key string, window time.Duration) (release func(), err error) {
	name := uniqueRecord(p.target.Name(), key)
	meta := p.recordMeta(payload.KindUnique, "", time.Now().Add(window))
	created, err := p.store.createRecord(ctx, name, meta)
	if err != nil {
		return nil, fmt.Errorf("azdispatch: unique key: %w", err)
	}
	if !created {
		rec, err := p.store.readRecord(ctx, name)
		switch {
		case errors.Is(err, ErrPayloadMissing):
			return p.claimKey(ctx, key, window) // released meanwhile
		case err != nil:
			return nil, fmt.Errorf("azdispatch: unique key: %w", err)
		case !rec.expired():
			return nil, fmt.Errorf("%w (until %s by the service's clock)", ErrDuplicate, rec.until().Format(time.RFC3339))
		}
		// Its window has passed: take it over, unless another sender
		// does first.
		if err := p.store.replaceRecord(ctx, name, meta, rec.etag); err != nil {
			if bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobNotFound) {
				return nil, fmt.Errorf("%w (taken over by another send just now)", ErrDuplicate)
			}
			return nil, fmt.Errorf("azdispatch: unique key: %w", err)
		}
	}
	return func() {
		// Not cut short by the send's context, which may be why it failed.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = p.store.remove(ctx, name)
	}, nil
}

// Records are blobs of the payload store named by a hash, so that every
// process finds the same one for the same message or key, and so that a
// key is not stored in clear. The names look like payload ids, so a sweep
// judges them by their metadata like payloads.

// cancelRecord names the cancel record of message id on queue.
func cancelRecord(queue, id string) string { return recordName(payload.KindCancel, queue, id) }

// uniqueRecord names the record of a unique key of a target.
func uniqueRecord(target, key string) string { return recordName(payload.KindUnique, target, key) }

func recordName(kind, scope, key string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + scope + "\x00" + key))
	return hex.EncodeToString(sum[:payload.BlobIDLen/2])
}

// record is a record blob as read: its metadata and ETag, and the times
// that say whether it has expired on the service's clock.
type record struct {
	name    string
	meta    payload.Meta
	etag    azcore.ETag
	written time.Time // its last write, by the service's clock
	now     time.Time // the read's Date
}

// until is when the record expires on the service's clock; zero if never.
func (r *record) until() time.Time {
	if r.meta.Expires.IsZero() {
		return time.Time{}
	}
	return r.written.Add(r.meta.Expires.Sub(r.meta.Created))
}

// expired reports whether the record has expired on the service's clock.
func (r *record) expired() bool {
	u := r.until()
	return !u.IsZero() && !r.now.Before(u)
}

// createRecord writes a record unless one of that name exists (one
// request, If-None-Match: *): created reports which. The container is
// created if missing.
func (s *PayloadStore) createRecord(ctx context.Context, name string, meta payload.Meta) (created bool, err error) {
	cond := &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	err = s.writeRecord(ctx, name, meta, cond)
	if err != nil && bloberror.HasCode(err, bloberror.ContainerNotFound) {
		_, cerr := s.client.Create(tagBlob(ctx, opBlobWrite), nil)
		if cerr != nil && !bloberror.HasCode(cerr, bloberror.ContainerAlreadyExists) {
			return false, s.err(opBlobWrite, "", cerr)
		}
		err = s.writeRecord(ctx, name, meta, cond)
	}
	switch {
	case err == nil:
		return true, nil
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		return false, nil
	}
	return false, s.err(opBlobWrite, name, err)
}

// replaceRecord overwrites a record if it still has etag.
func (s *PayloadStore) replaceRecord(ctx context.Context, name string, meta payload.Meta, etag azcore.ETag) error {
	return s.writeRecord(ctx, name, meta, &blob.ModifiedAccessConditions{IfMatch: &etag})
}

// writeRecord uploads a record under cond. Its body says what it is, for
// an operator who opens it; everything a process reads is in its metadata.
func (s *PayloadStore) writeRecord(ctx context.Context, name string, meta payload.Meta, cond *blob.ModifiedAccessConditions) error {
	body, _ := json.Marshal(map[string]string{"kind": meta.Kind, "state": meta.State, "queue": meta.Queue})
	_, err := s.client.NewBlockBlobClient(name).Upload(tagBlob(ctx, opBlobWrite), readSeekNopCloser{bytes.NewReader(body)}, &blockblob.UploadOptions{
		Metadata:         meta.ToMap(),
		HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: to.Ptr("application/json")},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
	})
	return err
}

// expireRecord marks a record expired now, for the next sweep to remove.
func (s *PayloadStore) expireRecord(ctx context.Context, r *record) error {
	_, err := s.update(ctx, r.name, r.meta, r.etag, func(m *payload.Meta) { m.Expires = m.Created })
	return err
}

// readRecord reads a record's metadata (one Get Blob Properties). A missing
// one matches [ErrPayloadMissing].
func (s *PayloadStore) readRecord(ctx context.Context, name string) (*record, error) {
	resp, err := s.client.NewBlobClient(name).GetProperties(tagBlob(ctx, opBlobRead), nil)
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			return nil, fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.name, name)
		}
		return nil, s.err(opBlobRead, name, err)
	}
	meta, ok := payload.ParseMeta(resp.Metadata)
	if !ok || !payload.IsRecord(meta.Kind) {
		return nil, fmt.Errorf("%w: %s is not a record", ErrPayloadCorrupt, name)
	}
	r := &record{name: name, meta: meta, etag: deref(resp.ETag), written: deref(resp.LastModified), now: deref(resp.Date)}
	if r.now.IsZero() {
		r.now = time.Now()
	}
	return r, nil
}
