package azdispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
)

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
