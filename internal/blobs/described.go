package blobs

import (
	"context"
	"io"
	"time"
)

// Described returns b with every request's error passed through
// describe, with the request's kind and blob name (empty for a listing or
// the container): what lets a layer on top of the blobs (a group's
// records, say) fail with its caller's own error type without handling
// each request's error itself. describe must keep err reachable (wrap it
// with %w, or in a type whose Unwrap returns it), so that the sentinels
// still match.
func Described(b Backend, describe func(op Op, name string, err error) error) Backend {
	return described{b: b, describe: describe}
}

type described struct {
	b        Backend
	describe func(op Op, name string, err error) error
}

func (d described) wrap(op Op, name string, info Info, err error) (Info, error) {
	if err != nil {
		return info, d.describe(op, name, err)
	}
	return info, nil
}

func (d described) Container() string { return d.b.Container() }

func (d described) Create(ctx context.Context, name string, w Write) (Info, error) {
	info, err := d.b.Create(ctx, name, w)
	return d.wrap(OpWrite, name, info, err)
}

func (d described) Replace(ctx context.Context, name string, w Write, etag string) (Info, error) {
	info, err := d.b.Replace(ctx, name, w, etag)
	return d.wrap(OpWrite, name, info, err)
}

func (d described) SetMetadata(ctx context.Context, name string, meta map[string]string, etag string) (Info, error) {
	info, err := d.b.SetMetadata(ctx, name, meta, etag)
	return d.wrap(OpWrite, name, info, err)
}

func (d described) SetLeasedMetadata(ctx context.Context, name string, meta map[string]string, lease string) (Info, error) {
	info, err := d.b.SetLeasedMetadata(ctx, name, meta, lease)
	return d.wrap(OpWrite, name, info, err)
}

func (d described) Read(ctx context.Context, name string) (io.ReadCloser, Info, error) {
	r, info, err := d.b.Read(ctx, name)
	info, err = d.wrap(OpRead, name, info, err)
	return r, info, err
}

func (d described) Properties(ctx context.Context, name string) (Info, error) {
	info, err := d.b.Properties(ctx, name)
	return d.wrap(OpRead, name, info, err)
}

func (d described) Delete(ctx context.Context, name, etag string) (Info, error) {
	info, err := d.b.Delete(ctx, name, etag)
	return d.wrap(OpDelete, name, info, err)
}

// List describes the listing's own failures; an error of page is page's
// and passes unchanged.
func (d described) List(ctx context.Context, prefix string, page func(blobs []Info, date time.Time) error) error {
	var pageErr error
	err := d.b.List(ctx, prefix, func(blobs []Info, date time.Time) error {
		pageErr = page(blobs, date)
		return pageErr
	})
	if err == nil || (pageErr != nil && err == pageErr) {
		return err
	}
	return d.describe(OpList, "", err)
}

func (d described) CreateContainer(ctx context.Context) error {
	if err := d.b.CreateContainer(ctx); err != nil {
		return d.describe(OpWrite, "", err)
	}
	return nil
}

func (d described) CreateAppend(ctx context.Context, name string, meta map[string]string) (Info, error) {
	info, err := d.b.CreateAppend(ctx, name, meta)
	return d.wrap(OpWrite, name, info, err)
}

func (d described) Append(ctx context.Context, name string, data []byte) (Info, error) {
	info, err := d.b.Append(ctx, name, data)
	return d.wrap(OpWrite, name, info, err)
}

func (d described) AcquireLease(ctx context.Context, name, id string, dur time.Duration) (Info, error) {
	info, err := d.b.AcquireLease(ctx, name, id, dur)
	return d.wrap(OpLease, name, info, err)
}

func (d described) RenewLease(ctx context.Context, name, id string) (Info, error) {
	info, err := d.b.RenewLease(ctx, name, id)
	return d.wrap(OpLease, name, info, err)
}

func (d described) ReleaseLease(ctx context.Context, name, id string) (Info, error) {
	info, err := d.b.ReleaseLease(ctx, name, id)
	return d.wrap(OpLease, name, info, err)
}
