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

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/svcclock"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/track"
)

// Records are blobs of the payload store named by a hash, so that every
// process finds the same one for the same message or key, and so that a
// key is not stored in clear. The names look like payload ids, so a sweep
// judges them by their metadata like payloads. What a publisher builds on
// them is here too: unique sends, then cancel.

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

// recordOf is the record an entry of the store's records describes.
func recordOf(e records.Entry) *record {
	return &record{name: e.Name, meta: e.Meta, etag: azcore.ETag(e.ETag), written: e.Written, now: e.Now}
}

// until is when the record expires on the service's clock; zero if never.
// Its write's time is known to the second (Last-Modified is cut, not
// rounded): the life is counted from the end of that second, so that it is
// never shorter than asked.
func (r *record) until() time.Time {
	if r.meta.Expires.IsZero() {
		return time.Time{}
	}
	return r.written.Add(time.Second + r.meta.Expires.Sub(r.meta.Created))
}

// expired reports whether the record has expired on the service's clock.
func (r *record) expired() bool {
	u := r.until()
	return !u.IsZero() && !r.now.Before(u)
}

// recordBody is what a cancel or unique-key record's body says, for an
// operator who opens it; everything a process reads is in its metadata.
func recordBody(meta payload.Meta) []byte {
	body, _ := json.Marshal(map[string]string{"kind": meta.Kind, "state": meta.State, "queue": meta.Queue})
	return body
}

// createRecord writes a record unless one of that name exists (one
// request, If-None-Match: *): created reports which, and rec is the new
// record, or the one found (one request more), unless it is this write's
// own (see records.Blobs.Create). A record gone by the time it is read
// gives an error matching [ErrPayloadMissing].
func (s *PayloadStore) createRecord(ctx context.Context, name string, meta payload.Meta) (rec *record, created bool, err error) {
	e, created, err := s.records.Create(ctx, name, meta, recordBody(meta))
	if err != nil {
		return nil, false, s.missing(name, err)
	}
	return recordOf(e), created, nil
}

// replaceRecord overwrites a record if it still has etag, and returns it
// as written; one changed since gives an error matching
// records.ErrChanged, unless the change is this write's own.
func (s *PayloadStore) replaceRecord(ctx context.Context, name string, meta payload.Meta, etag azcore.ETag) (*record, error) {
	e, err := s.records.Replace(ctx, name, meta, recordBody(meta), string(etag))
	if err != nil {
		return nil, err
	}
	return recordOf(e), nil
}

// removeRecord deletes a record if it still has etag: one written since by
// someone else stays. It reports nothing: a record left is removed by a
// sweep once expired.
func (s *PayloadStore) removeRecord(ctx context.Context, name string, etag azcore.ETag) {
	s.records.Remove(ctx, name, string(etag))
}

// expireRecord marks a record expired now, for the next sweep to remove.
func (s *PayloadStore) expireRecord(ctx context.Context, r *record) error {
	_, err := s.update(ctx, r.name, r.meta, r.etag, func(m *payload.Meta) { m.Expires = m.Created })
	return err
}

// readRecord reads a record's metadata (one Get Blob Properties). A missing
// one matches [ErrPayloadMissing].
func (s *PayloadStore) readRecord(ctx context.Context, name string) (*record, error) {
	e, err := s.records.Props(ctx, name)
	if err != nil {
		return nil, s.missing(name, err)
	}
	return recordOf(e), nil
}

// missing is err, matching [ErrPayloadMissing] too if it says the record
// name is missing.
func (s *PayloadStore) missing(name string, err error) error {
	if errors.Is(err, records.ErrMissing) {
		return fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.Container(), name)
	}
	return err
}

// recordsOf is where records about messages are kept: in the payload
// store of their publisher or listener (a memqueue.Queue's, in memory on
// its clock, by default); nil without one.
func recordsOf(store *PayloadStore) records.Store {
	if store != nil {
		return store.records
	}
	return nil
}

// recordMeta is the metadata of a record the publisher writes, to live for
// life from its write (never, if zero). A life, not a time: Sweep and a
// unique key's owner measure it from the record's write on the service's
// clock (see sweepDue and record.until), so no clock of this machine's
// enters.
func (p *Publisher[T]) recordMeta(kind, state string, life time.Duration) payload.Meta {
	now := time.Now()
	m := payload.Meta{Kind: kind, State: state, Queue: p.target.Name(), Created: now}
	if life > 0 {
		m.Expires = now.Add(life)
	}
	return m
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

// claimKey takes a unique send's key for window, or fails with
// [ErrDuplicate] if a send within its window holds it. release gives it
// back (for a send that failed), unless another send has taken it over
// since.
func (p *Publisher[T]) claimKey(ctx context.Context, key string, window time.Duration) (release func(), err error) {
	name := uniqueRecord(p.target.Name(), key)
	meta := p.recordMeta(payload.KindUnique, "", window)
	var held *record
	for try := 0; held == nil; try++ {
		rec, created, err := p.store.createRecord(ctx, name, meta)
		switch {
		case errors.Is(err, ErrPayloadMissing) && try < 2:
			continue // given back between our write and our read: take it
		case err != nil:
			return nil, wrapf(err, "unique key")
		case created:
			held = rec
		case !rec.expired():
			return nil, fmt.Errorf("%w (until %s by the service's clock)", ErrDuplicate, rec.until().Format(time.RFC3339))
		default:
			// Its window has passed: take it over, unless another sender
			// does first.
			held, err = p.store.replaceRecord(ctx, name, meta, rec.etag)
			switch {
			case errors.Is(err, records.ErrChanged):
				return nil, fmt.Errorf("%w (taken over by another send just now)", ErrDuplicate)
			case err != nil:
				return nil, wrapf(err, "unique key")
			}
		}
	}
	etag := held.etag
	return func() {
		// Not cut short by the send's context, which may be why it failed.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		p.store.removeRecord(ctx, name, etag)
	}, nil
}

// Cancel: a message sent for later is cancelled by a record a listener
// finds when the message is due.

// cancelToken is what [Sent.Token] holds: where the message is, the pop
// receipt that deletes it until a listener first receives it, and what a
// cancel must know of it.
type cancelToken struct {
	Queue   string `json:"q"`
	ID      string `json:"i"`
	Receipt string `json:"r"`
	Due     int64  `json:"d"`           // Unix seconds, the service's clock
	Hops    bool   `json:"h,omitempty"` // listeners may hide it again (see Publisher.hops)
	Blob    string `json:"b,omitempty"` // its payload blob, if offloaded
	Expires int64  `json:"x,omitempty"` // Unix seconds; 0: never
	Track   string `json:"t,omitempty"` // its status token, if tracked
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
	if c.Track != "" && !track.ValidToken(c.Track) {
		return c, bad("its status token is not one")
	}
	return c, nil
}

// Cancel makes sure the handler never runs for a message sent by any send of
// the publisher (a batch included), at any time before a listener receives
// it to handle: token is its [Sent.Token]. It fails with an error matching
// [ErrAlreadyDelivered] if a listener has it already (or it is gone:
// deleted, expired, or cleared by someone else), and [ErrAlreadyCancelled] if
// it was cancelled before. Cancels of one message racing each other, in any
// processes, agree: one returns nil, or all say it was delivered.
//
// A cancel first writes the message's cancel record to the payload store
// (If-None-Match: *), whose state a second cancel reads, then deletes the
// message with its send's pop receipt, and its payload blob, if any. A
// message listeners may hide again (due beyond 7 days) that a listener has
// hidden again since
// cannot be deleted so: the record stays, and the listener that receives
// the message when it is due finds it and deletes the message, its blob
// and the record without running the handler (so that listener must read
// the same payload store). Any other message whose receipt has changed has
// been delivered: its record then says so. A cancel costs two requests
// (the record and the delete), and a third, the record's final state, for
// a message no listener hides again. The record lives as long as the
// message could; [Sweep] removes it after. A cancel after the message's
// life says [ErrAlreadyDelivered] (delivered or expired); the delivered
// record of a message that never expires is kept for 30 days past its due
// time, and a cancel after that cannot tell whether it was delivered: it
// says [ErrCancelUndetermined], never nil. Whether the message has expired,
// and how long its record lives, are judged on the service's clock, learnt
// first (one request) if nothing has told the publisher yet. A unique
// send's key stays held until its window ends: cancelling does not free
// it.
//
// A message never cancelled pays nothing for this, unless listeners may
// hide it again: the listener that receives it when due then writes a
// delivered record (one conditional write), so that a cancel and a
// delivery at the same moment cannot both win.
//
// A tracked message (see [SendOptions.Track]) has its status moved to
// cancelled: a cancel that cancelled it but could not record that returns
// an error, and a cancel tried again records it (and says
// [ErrAlreadyCancelled]).
//
// A cancel that fails (its context ended, storage failed) may be tried
// again: for a message listeners may hide again it is done once its record
// is written; otherwise it gives its record back, and a record a cancel that
// stopped midway left pending is taken over after 10 s. If only the answer
// of its delete was lost, a cancel tried again finds the message gone and
// says [ErrAlreadyDelivered].
//
// Cancel needs the publisher's target to be a [CancelTarget] (a [*Queue],
// a memqueue.Queue) or a [ShardedQueue] of them (whose shard the token
// names). Without a payload store it can only delete
// a message still in its send's hidden period, and cannot tell a message
// delivered from one cancelled before.
func (p *Publisher[T]) Cancel(ctx context.Context, token string) error {
	c, err := parseCancelToken(token)
	if err != nil {
		return err
	}
	q := p.queueNamed(c.Queue)
	if q == nil {
		return &ConfigError{Field: "Cancel's token", Reason: fmt.Sprintf("names queue %q, which is not %s or one of its shards", c.Queue, p.target.Name())}
	}
	// Whether it has expired, and how long its record must live, are
	// judged on the service's clock: learn it first, if nothing has told
	// it yet.
	if err := CapabilitiesOf(q).learnServiceTime(ctx); err != nil {
		return c.fail(err)
	}
	if c.Expires != 0 && !q.ServiceTime().Before(time.Unix(c.Expires, 0)) {
		// Past its life: delivered or expired, and its record may be
		// swept already (a new one would be taken for a cancel).
		return c.fail(ErrAlreadyDelivered)
	}
	if p.store == nil {
		return p.cancelUnrecorded(ctx, q, c)
	}
	err = p.cancelRecorded(ctx, q, c)
	switch {
	case errors.Is(err, ErrAlreadyCancelled):
		_ = p.trackCancelled(ctx, c) // an earlier cancel's that could not record it
		return err
	case err != nil:
		return err
	}
	if err := p.trackCancelled(ctx, c); err != nil {
		return c.fail(fmt.Errorf("cancelled, but its status could not be recorded so (a Cancel again records it, and says ErrAlreadyCancelled): %w", err))
	}
	return nil
}

// fail says which message's cancel failed.
func (c cancelToken) fail(err error) error { return wrapf(err, "cancel %s", c.ID) }

// cancelUnrecorded cancels without a payload store: by the delete alone,
// which cannot tell a message hidden again from one delivered.
func (p *Publisher[T]) cancelUnrecorded(ctx context.Context, q CancelTarget, c cancelToken) error {
	err := p.deleteSent(ctx, q, c)
	switch {
	case err == nil || !errors.Is(err, ErrOwnershipLost):
		return err
	case c.Hops:
		return c.fail(fmt.Errorf("it was received since its send and may have been hidden again; a cancel record needs a payload store: %w", p.noStore()))
	}
	return c.fail(ErrAlreadyDelivered)
}

// cancelRecorded writes c's cancel record, or reads the one an earlier
// cancel wrote, and cancels as it says.
func (p *Publisher[T]) cancelRecorded(ctx context.Context, q CancelTarget, c cancelToken) error {
	name := cancelRecord(c.Queue, c.ID)
	meta := p.cancelMeta(q, c)
	for try := 0; ; try++ {
		rec, created, err := p.store.createRecord(ctx, name, meta)
		if err == nil && !created {
			rec, err = p.settledRecord(ctx, rec)
		}
		switch {
		case errors.Is(err, ErrPayloadMissing) && try < 2:
			continue // gone between our write and our read (given back, or swept): write it again
		case err != nil:
			return c.fail(err)
		case created:
			return p.cancelAs(ctx, q, c, rec)
		case rec.meta.State == payload.StateCancelled:
			return c.fail(ErrAlreadyCancelled)
		case rec.meta.State == payload.StateDelivered:
			return c.fail(ErrAlreadyDelivered)
		case rec.meta.State == payload.StateUndetermined:
			return c.fail(fmt.Errorf("an earlier cancel could not tell: %w", ErrCancelUndetermined))
		}
		// Pending for longer than any cancel takes: one that stopped
		// midway left it. Take it over, and decide by the delete.
		if rec, err = p.store.replaceRecord(ctx, name, meta, rec.etag); err != nil {
			if errors.Is(err, records.ErrChanged) && try < 2 {
				continue // another cancel took it over first
			}
			return c.fail(err)
		}
		return p.cancelAs(ctx, q, c, rec)
	}
}

// cancelMeta is the metadata of c's cancel record: the state a listener or
// a second cancel reads, and a life as long as its message's.
func (p *Publisher[T]) cancelMeta(q CancelTarget, c cancelToken) payload.Meta {
	state := payload.StateCancelled // a listener will read it when the message is due
	switch {
	case !c.Hops:
		state = payload.StatePending // no listener reads it: the delete decides
	case c.Expires == 0 && !q.ServiceTime().Before(time.Unix(c.Due, 0).Add(deliveredRecordLife)):
		// Due longer ago than the record of a delivery is kept, and it
		// never expires: if a listener delivered it, nothing may say so
		// any more. The cancel is recorded all the same, so that a
		// delivery still to come is dropped, but it cannot say whether
		// it came too late.
		state = payload.StateUndetermined
	}
	life := time.Duration(0) // never expires, as its message
	if c.Expires != 0 {
		// Its message's expiry is on the service's clock.
		life = max(time.Unix(c.Expires, 0).Sub(q.ServiceTime()), time.Second)
	}
	return p.recordMeta(payload.KindCancel, state, life)
}

// cancelAs finishes a cancel that wrote the message's record rec: it
// deletes the message and says what became of it. The record is settled,
// or given back, whatever becomes of ctx: a record left pending makes
// every later cancel wait for it (see settledRecord).
func (p *Publisher[T]) cancelAs(ctx context.Context, q CancelTarget, c cancelToken, rec *record) error {
	name, meta, etag := rec.name, rec.meta, rec.etag
	// Within half the time other cancels wait for a pending record, so
	// that none takes it over while this delete may still succeed.
	dctx, stop := context.WithTimeout(ctx, pendingLimit/2)
	dctx, tries := svcclock.WithTries(dctx)
	err := p.deleteSent(dctx, q, c)
	stop()
	after, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	settle := func(state string) {
		if meta.State != state {
			_, _ = p.store.update(after, name, meta, etag, func(m *payload.Meta) { m.State = state })
		}
	}
	switch {
	case err == nil:
		settle(payload.StateCancelled)
		if c.Blob != "" {
			_ = p.store.remove(after, c.Blob)
		}
		return nil
	case meta.State == payload.StateUndetermined:
		// Received since its send, or the delete failed: delivered long
		// ago, or still waiting to be (a listener would drop it now).
		return wrapf(ErrCancelUndetermined, "cancel %s: it was due more than 30 days ago, and a delivery's record is kept 30 days", c.ID)
	case c.Hops:
		// Hidden again since, or the delete failed: either way the
		// listener finds the record when the message is due, and drops it.
		return nil
	case !errors.Is(err, ErrOwnershipLost):
		// Not known whether it was deleted: give the record back, so
		// that a cancel tried again decides. (If the delete was done and
		// only its answer lost, that cancel finds the message gone and
		// takes it for delivered.)
		p.store.removeRecord(after, name, etag)
		return err
	}
	if tries.LostAnswer() {
		// An attempt of the delete got no answer, and its retry found
		// the receipt stale: that attempt may have deleted the message,
		// or a listener may have received it. The service cannot tell
		// the two apart any more.
		settle(payload.StateUndetermined)
		return wrapf(ErrCancelUndetermined, "cancel %s: the answer of its delete was lost, and the retry found the message gone", c.ID)
	}
	// No listener hides it again: a receive was its delivery.
	settle(payload.StateDelivered)
	return wrapf(ErrAlreadyDelivered, "cancel %s", c.ID)
}

// pendingLimit is how long a pending cancel record is waited for: a
// cancel takes two requests, and one pending longer stopped midway.
const pendingLimit = 10 * time.Second

// settledRecord is a message's cancel record rec, as read, once no other
// cancel is deciding: while it is pending it is read again, and one still
// pending after pendingLimit (by the service's clock, from its write) is
// returned as it is, abandoned.
func (p *Publisher[T]) settledRecord(ctx context.Context, rec *record) (*record, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if rec.meta.State != payload.StatePending || rec.now.Sub(rec.written) > pendingLimit {
			return rec, nil
		}
		if !syncx.Sleep(ctx, wait, nil) {
			return nil, context.Cause(ctx)
		}
		var err error
		if rec, err = p.store.readRecord(ctx, rec.name); err != nil {
			return nil, err
		}
	}
}

// deleteSent deletes a sent message with its send's pop receipt.
func (p *Publisher[T]) deleteSent(ctx context.Context, q CancelTarget, c cancelToken) error {
	err := q.DeleteSent(ctx, c.ID, c.Receipt)
	if err != nil && !errors.Is(err, ErrOwnershipLost) {
		return wrapf(err, "cancel %s", c.ID)
	}
	return err
}

// queueNamed is the publisher's target, or its shard, called name, if it
// is a [CancelTarget].
func (p *Publisher[T]) queueNamed(name string) CancelTarget {
	if p.caps.queueNamed == nil {
		return nil
	}
	return p.caps.queueNamed(name)
}

// CancelTarget is a [Target] that tells what [Publisher.Cancel] needs of
// the messages it takes: a [*Queue] and a memqueue.Queue are. A Publisher
// on one, or on a [ShardedQueue] over them, gives each message a
// [Sent.Token].
type CancelTarget interface {
	Target
	// SentReceipt is the pop receipt the send of message id was answered
	// with, with which DeleteSent deletes it until a listener first
	// receives it, and its insertion time on the target's clock; ok is
	// false if the target cannot tell (a [*Queue]'s send tells its
	// publisher itself). A publisher asks right after Send, so a Target
	// that wraps one and sends through it keeps its own Send.
	SentReceipt(id string) (receipt string, inserted time.Time, ok bool)
	// DeleteSent deletes message id by the pop receipt its send returned.
	// A receipt made stale since (the message was received, or is gone)
	// gives an error matching [ErrOwnershipLost].
	DeleteSent(ctx context.Context, id, receipt string) error
	// ServiceTime is the time by the clock the target's messages are
	// judged on: the service's.
	ServiceTime() time.Time
}

var _ CancelTarget = (*Queue)(nil)

// SentReceipt implements [CancelTarget]: a queue keeps no receipts, ok is
// false. A [Publisher] has its send's answer tell it instead.
func (q *Queue) SentReceipt(string) (receipt string, inserted time.Time, ok bool) {
	return "", time.Time{}, false
}

// DeleteSent implements [CancelTarget]: one Delete Message, with the pop
// receipt of the message's send.
func (q *Queue) DeleteSent(ctx context.Context, id, receipt string) error {
	return q.Delete(ctx, &Delivery{ID: id, Queue: q.name, Receipt: &popReceipt{queue: q, value: receipt}})
}
