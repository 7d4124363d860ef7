package records

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/payload"
)

// ErrNotRecord is matched by the error of a read of a blob that is not a
// record (no record metadata, or a value too long).
var ErrNotRecord = errors.New("not a record")

// Blobs keeps records as blobs of a [blobs.Backend]: the kind, state,
// queue and life in metadata (as a sweep reads them), the value in the
// body, the version in the ETag, and the time from each answer's Date. It
// is the one record store of the library: a scheduler's states, a
// listener's marks, and a publisher's cancel and unique-key records. It
// implements [Store].
//
// Every write carries a token its writer chose (payload.Meta.Writer), so a
// write that took effect but whose answer was lost, and which was tried
// again into a conflict with itself, is known for its own.
type Blobs struct {
	backend blobs.Backend
	clock   Clock
	wrap    func(op blobs.Op, name string, err error) error
}

var _ Store = (*Blobs)(nil)

// OnBlobs returns the records kept in backend, judged on clock. wrap, if
// not nil, shapes the errors of failed requests and of blobs that are not
// records ([ErrNotRecord]); ErrMissing and ErrChanged are returned as they
// are.
func OnBlobs(backend blobs.Backend, clock Clock, wrap func(op blobs.Op, name string, err error) error) *Blobs {
	if wrap == nil {
		wrap = func(_ blobs.Op, name string, err error) error { return fmt.Errorf("record %s: %w", name, err) }
	}
	return &Blobs{backend: backend, clock: clock, wrap: wrap}
}

// Entry is a record as read or written, metadata first: its metadata, its
// ETag, and the times that say whether it has expired on the store's
// clock.
type Entry struct {
	Name    string
	Meta    payload.Meta
	ETag    string
	Written time.Time // its last write, by the store's clock (to the second)
	Now     time.Time // the answer's Date; the clock's time if it had none
}

// entry is the Entry an answer describes.
func (b *Blobs) entry(name string, meta payload.Meta, info blobs.Info) Entry {
	e := Entry{Name: name, Meta: meta, ETag: info.ETag, Written: info.Modified, Now: info.Date}
	if e.Now.IsZero() {
		e.Now = b.clock.Now()
	}
	return e
}

// Create writes a record unless one of that name exists (one request,
// If-None-Match: *): created reports which, and the entry is the new
// record, or the one found (read with one request more), unless the one
// found carries this write's token: its own, created. One gone by the
// time it is read gives ErrMissing.
func (b *Blobs) Create(ctx context.Context, name string, meta payload.Meta, body []byte) (Entry, bool, error) {
	meta.Writer = payload.NewWriterToken()
	info, err := b.backend.Create(ctx, name, blobs.Write{Data: body, Metadata: meta.Strings(), ContentType: "application/json"})
	switch {
	case err == nil:
		return b.entry(name, meta, info), true, nil
	case !errors.Is(err, blobs.ErrConflict):
		return Entry{}, false, b.wrap(blobs.OpWrite, name, err)
	}
	found, err := b.Props(ctx, name)
	if err != nil {
		return Entry{}, false, err
	}
	return found, found.Meta.Writer == meta.Writer, nil
}

// Replace overwrites a record if it still has etag, and returns it as
// written. A write refused because the record changed (ErrChanged) is
// this write's own if the record now carries its token: one read tells.
func (b *Blobs) Replace(ctx context.Context, name string, meta payload.Meta, body []byte, etag string) (Entry, error) {
	meta.Writer = payload.NewWriterToken()
	info, err := b.backend.Replace(ctx, name, blobs.Write{Data: body, Metadata: meta.Strings(), ContentType: "application/json"}, etag)
	switch {
	case err == nil:
		return b.entry(name, meta, info), nil
	case !errors.Is(err, blobs.ErrConflict):
		return Entry{}, b.wrap(blobs.OpWrite, name, err)
	}
	if own, rerr := b.Props(ctx, name); rerr == nil && own.Meta.Writer == meta.Writer {
		return own, nil
	}
	return Entry{}, fmt.Errorf("%w: %s/%s", ErrChanged, b.backend.Container(), name)
}

// Props reads a record's metadata (one Get Blob Properties). A missing one
// gives ErrMissing.
func (b *Blobs) Props(ctx context.Context, name string) (Entry, error) {
	info, err := b.backend.Properties(ctx, name)
	switch {
	case errors.Is(err, blobs.ErrNotFound):
		return Entry{}, fmt.Errorf("%w: %s/%s", ErrMissing, b.backend.Container(), name)
	case err != nil:
		return Entry{}, b.wrap(blobs.OpRead, name, err)
	}
	meta, ok := payload.ParseStrings(info.Metadata)
	if !ok || !payload.IsRecord(meta.Kind) {
		return Entry{}, b.wrap(blobs.OpRead, name, ErrNotRecord)
	}
	return b.entry(name, meta, info), nil
}

// Remove deletes a record if it still has etag: one written since by
// someone else stays. It reports nothing: a record left is removed by a
// sweep once expired.
func (b *Blobs) Remove(ctx context.Context, name, etag string) {
	_, _ = b.backend.Delete(ctx, name, etag)
}

// Read implements [Store]: one Get Blob.
func (b *Blobs) Read(ctx context.Context, name string) (*Record, error) {
	body, info, err := b.backend.Read(ctx, name)
	switch {
	case errors.Is(err, blobs.ErrNotFound):
		return nil, fmt.Errorf("%w: %s/%s", ErrMissing, b.backend.Container(), name)
	case err != nil:
		return nil, b.wrap(blobs.OpRead, name, err)
	}
	defer body.Close()
	value, err := io.ReadAll(io.LimitReader(body, MaxValue+1))
	if err != nil {
		return nil, b.wrap(blobs.OpRead, name, err)
	}
	meta, ok := payload.ParseStrings(info.Metadata)
	if !ok || !payload.IsRecord(meta.Kind) || len(value) > MaxValue {
		return nil, b.wrap(blobs.OpRead, name, ErrNotRecord)
	}
	e := b.entry(name, meta, info)
	r := &Record{Kind: meta.Kind, Value: value, Version: e.ETag, Written: e.Written, Now: e.Now}
	if !meta.Expires.IsZero() {
		r.Life = meta.Expires.Sub(meta.Created)
	}
	return r, nil
}

// Write implements [Store]: one Put Blob, If-None-Match: * or If-Match its
// version.
func (b *Blobs) Write(ctx context.Context, name string, r *Record) error {
	if len(r.Value) > MaxValue {
		return fmt.Errorf("record %s: value of %d bytes, more than %d", name, len(r.Value), MaxValue)
	}
	// Created and Expires are only a life for a sweep: both this
	// machine's, so that its clock cancels out.
	now := time.Now()
	meta := payload.Meta{Kind: r.Kind, Created: now}
	if r.Life > 0 {
		meta.Expires = now.Add(r.Life)
	}
	var e Entry
	var err error
	if r.Version == "" {
		var created bool
		e, created, err = b.Create(ctx, name, meta, r.Value)
		if err == nil && !created {
			err = fmt.Errorf("%w: %s/%s exists", ErrChanged, b.backend.Container(), name)
		}
	} else {
		e, err = b.Replace(ctx, name, meta, r.Value, r.Version)
	}
	if errors.Is(err, ErrMissing) {
		err = fmt.Errorf("%w: %w", ErrChanged, err) // created, then removed, before its read
	}
	if err != nil {
		return err
	}
	r.Version, r.Written, r.Now = e.ETag, e.Written, e.Now
	return nil
}

// Now implements [Store].
func (b *Blobs) Now() time.Time { return b.clock.Now() }

// Known implements [Store].
func (b *Blobs) Known() bool { return b.clock.Known() }

// Sleep implements [Store].
func (b *Blobs) Sleep(ctx context.Context, until time.Time, wake <-chan struct{}) bool {
	return b.clock.Sleep(ctx, until, wake)
}
