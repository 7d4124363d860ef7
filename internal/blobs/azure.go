package blobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/appendblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
)

// Azure is a [Backend] on a container of the Azure blob service. Requests
// go through the client's pipeline as they are: its retries, its counting
// and its clock policies see each attempt.
type Azure struct {
	client *container.Client
	name   string
	tag    func(context.Context, Op) context.Context
}

var _ Backend = (*Azure)(nil)

// NewAzure returns the backend of the container client names. tag, if not
// nil, marks each request's context with its kind before it is made, for
// the policies of the client's pipeline to count it.
func NewAzure(client *container.Client, name string, tag func(context.Context, Op) context.Context) *Azure {
	if tag == nil {
		tag = func(ctx context.Context, _ Op) context.Context { return ctx }
	}
	return &Azure{client: client, name: name, tag: tag}
}

// Container implements [Backend].
func (a *Azure) Container() string { return a.name }

// Create implements [Backend]: one Put Blob, If-None-Match: *; and, if
// the container is missing, one Create Container and the Put Blob again.
func (a *Azure) Create(ctx context.Context, name string, w Write) (Info, error) {
	info, err := a.upload(ctx, name, w, &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)})
	if err != nil && bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if err := a.CreateContainer(ctx); err != nil {
			return Info{}, err
		}
		info, err = a.upload(ctx, name, w, &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)})
	}
	return info, classify(err, false)
}

// Replace implements [Backend]: one Put Blob, If-Match.
func (a *Azure) Replace(ctx context.Context, name string, w Write, etag string) (Info, error) {
	info, err := a.upload(ctx, name, w, &blob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(etag))})
	// A blob gone since its ETag was read has changed, as far as a
	// replace is concerned.
	return info, classify(err, true)
}

func (a *Azure) upload(ctx context.Context, name string, w Write, cond *blob.ModifiedAccessConditions) (Info, error) {
	ctx = a.tag(ctx, OpWrite)
	opts := &blockblob.UploadOptions{
		Metadata:         toPtrs(w.Metadata),
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
	}
	if w.ContentType != "" {
		opts.HTTPHeaders = &blob.HTTPHeaders{BlobContentType: to.Ptr(w.ContentType)}
	}
	resp, err := a.client.NewBlockBlobClient(name).Upload(ctx, nopCloser{bytes.NewReader(w.Data)}, opts)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: name, Metadata: w.Metadata, ETag: string(deref(resp.ETag)), Size: int64(len(w.Data)),
		Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// SetMetadata implements [Backend]: one Set Blob Metadata.
func (a *Azure) SetMetadata(ctx context.Context, name string, meta map[string]string, etag string) (Info, error) {
	ctx = a.tag(ctx, OpWrite)
	opts := &blob.SetMetadataOptions{}
	if etag != "" {
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(etag))}}
	}
	resp, err := a.client.NewBlobClient(name).SetMetadata(ctx, toPtrs(meta), opts)
	if err != nil {
		return Info{}, classify(err, false)
	}
	return Info{Name: name, Metadata: meta, ETag: string(deref(resp.ETag)), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// SetLeasedMetadata implements [Backend]: one Set Blob Metadata, under
// the lease.
func (a *Azure) SetLeasedMetadata(ctx context.Context, name string, meta map[string]string, lease string) (Info, error) {
	ctx = a.tag(ctx, OpWrite)
	opts := &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: to.Ptr(lease)}}}
	resp, err := a.client.NewBlobClient(name).SetMetadata(ctx, toPtrs(meta), opts)
	if err != nil {
		return Info{}, classifyLease(err)
	}
	return Info{Name: name, Metadata: meta, ETag: string(deref(resp.ETag)), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// Read implements [Backend]: one Get Blob, whose body streams.
func (a *Azure) Read(ctx context.Context, name string) (io.ReadCloser, Info, error) {
	ctx = a.tag(ctx, OpRead)
	resp, err := a.client.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		return nil, Info{}, classify(err, false)
	}
	return resp.Body, Info{Name: name, Metadata: fromPtrs(resp.Metadata), ETag: string(deref(resp.ETag)),
		Size: deref(resp.ContentLength), Created: deref(resp.CreationTime), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// Properties implements [Backend]: one Get Blob Properties.
func (a *Azure) Properties(ctx context.Context, name string) (Info, error) {
	ctx = a.tag(ctx, OpRead)
	resp, err := a.client.NewBlobClient(name).GetProperties(ctx, nil)
	if err != nil {
		return Info{}, classify(err, false)
	}
	return Info{Name: name, Metadata: fromPtrs(resp.Metadata), ETag: string(deref(resp.ETag)),
		Size: deref(resp.ContentLength), Created: deref(resp.CreationTime), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// Delete implements [Backend]: one Delete Blob.
func (a *Azure) Delete(ctx context.Context, name, etag string) (Info, error) {
	ctx = a.tag(ctx, OpDelete)
	var opts *blob.DeleteOptions
	if etag != "" {
		opts = &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(etag))}}}
	}
	resp, err := a.client.NewBlobClient(name).Delete(ctx, opts)
	if err != nil {
		return Info{}, classify(err, false)
	}
	return Info{Name: name, Date: deref(resp.Date)}, nil
}

// List implements [Backend]: one List Blobs per 5,000 blobs.
func (a *Azure) List(ctx context.Context, prefix string, page func([]Info, time.Time) error) error {
	ctx = a.tag(ctx, OpList)
	opts := &container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}}
	if prefix != "" {
		opts.Prefix = to.Ptr(prefix)
	}
	pager := a.client.NewListBlobsFlatPager(opts)
	for pager.More() {
		resp, err := pager.NextPage(ctx)
		if err != nil {
			if bloberror.HasCode(err, bloberror.ContainerNotFound) {
				return nil // nothing was ever written
			}
			return classify(err, false)
		}
		if resp.Segment == nil {
			continue
		}
		infos := make([]Info, 0, len(resp.Segment.BlobItems))
		for _, item := range resp.Segment.BlobItems {
			if item == nil || item.Name == nil {
				continue
			}
			info := Info{Name: *item.Name, Metadata: fromPtrs(item.Metadata)}
			if p := item.Properties; p != nil {
				info.ETag, info.Size = string(deref(p.ETag)), deref(p.ContentLength)
				info.Created, info.Modified = deref(p.CreationTime), deref(p.LastModified)
				info.Leased = deref(p.LeaseState) == lease.StateTypeLeased
			}
			infos = append(infos, info)
		}
		if err := page(infos, deref(resp.Date)); err != nil {
			return err
		}
	}
	return nil
}

// CreateContainer implements [Backend]: one Create Container.
func (a *Azure) CreateContainer(ctx context.Context) error {
	ctx = a.tag(ctx, OpWrite)
	_, err := a.client.Create(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return err
	}
	return nil
}

// CreateAppend implements [Backend]: one Put Blob (append blob),
// If-None-Match: *; and, if the container is missing, one Create Container
// and the Put Blob again.
func (a *Azure) CreateAppend(ctx context.Context, name string, meta map[string]string) (Info, error) {
	create := func() (appendblob.CreateResponse, error) {
		return a.client.NewAppendBlobClient(name).Create(a.tag(ctx, OpWrite), &appendblob.CreateOptions{
			Metadata:         toPtrs(meta),
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}},
		})
	}
	resp, err := create()
	if err != nil && bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if err := a.CreateContainer(ctx); err != nil {
			return Info{}, err
		}
		resp, err = create()
	}
	if err != nil {
		return Info{}, classify(err, false)
	}
	return Info{Name: name, Metadata: meta, ETag: string(deref(resp.ETag)), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// Append implements [Backend]: one Append Block.
func (a *Azure) Append(ctx context.Context, name string, data []byte) (Info, error) {
	resp, err := a.client.NewAppendBlobClient(name).AppendBlock(a.tag(ctx, OpWrite), nopCloser{bytes.NewReader(data)}, nil)
	if err != nil {
		return Info{}, classify(err, false)
	}
	return Info{Name: name, ETag: string(deref(resp.ETag)), Blocks: int(deref(resp.BlobCommittedBlockCount)),
		Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// AcquireLease implements [Backend]: one Lease Blob (acquire), with id
// as the proposed lease ID, which the service takes again from the lease's
// holder.
func (a *Azure) AcquireLease(ctx context.Context, name, id string, d time.Duration) (Info, error) {
	c, err := a.leaseClient(name, id)
	if err != nil {
		return Info{}, err
	}
	resp, err := c.AcquireLease(a.tag(ctx, OpLease), int32(d/time.Second), nil)
	if err != nil {
		return Info{}, classifyLease(err)
	}
	return Info{Name: name, ETag: string(deref(resp.ETag)), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// RenewLease implements [Backend]: one Lease Blob (renew).
func (a *Azure) RenewLease(ctx context.Context, name, id string) (Info, error) {
	c, err := a.leaseClient(name, id)
	if err != nil {
		return Info{}, err
	}
	resp, err := c.RenewLease(a.tag(ctx, OpLease), nil)
	if err != nil {
		return Info{}, classifyLease(err)
	}
	return Info{Name: name, ETag: string(deref(resp.ETag)), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

// ReleaseLease implements [Backend]: one Lease Blob (release).
func (a *Azure) ReleaseLease(ctx context.Context, name, id string) (Info, error) {
	c, err := a.leaseClient(name, id)
	if err != nil {
		return Info{}, err
	}
	resp, err := c.ReleaseLease(a.tag(ctx, OpLease), nil)
	if bloberror.HasCode(err, bloberror.LeaseNotPresentWithLeaseOperation, bloberror.LeaseIDMismatchWithLeaseOperation) {
		return Info{Name: name}, nil // not held under id: released already, or lost
	}
	if err != nil {
		return Info{}, classifyLease(err)
	}
	return Info{Name: name, ETag: string(deref(resp.ETag)), Modified: deref(resp.LastModified), Date: deref(resp.Date)}, nil
}

func (a *Azure) leaseClient(name, id string) (*lease.BlobClient, error) {
	return lease.NewBlobClient(a.client.NewBlobClient(name), &lease.BlobClientOptions{LeaseID: to.Ptr(id)})
}

// classifyLease is classify for a lease request: the service's refusals
// of a lease another holds match ErrLeased.
func classifyLease(err error) error {
	if bloberror.HasCode(err, bloberror.LeaseAlreadyPresent, bloberror.LeaseIDMismatchWithLeaseOperation,
		bloberror.LeaseNotPresentWithLeaseOperation, bloberror.LeaseIsBrokenAndCannotBeRenewed, bloberror.LeaseLost,
		bloberror.LeaseIDMismatchWithBlobOperation, bloberror.LeaseNotPresentWithBlobOperation) {
		return fmt.Errorf("%w: %w", ErrLeased, err)
	}
	return classify(err, false)
}

// classify wraps err in the sentinel its answer matches; goneIsConflict
// takes a missing blob for a changed one.
func classify(err error, goneIsConflict bool) error {
	switch {
	case err == nil:
		return nil
	case bloberror.HasCode(err, bloberror.LeaseIDMissing):
		return fmt.Errorf("%w: %w", ErrLeased, err)
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) && goneIsConflict:
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func toPtrs(mp map[string]string) map[string]*string {
	if mp == nil {
		return nil
	}
	out := make(map[string]*string, len(mp))
	for k, v := range mp {
		out[k] = to.Ptr(v)
	}
	return out
}

// fromPtrs is metadata as the SDK returns it, names in lower case: the
// service keeps names as written, but the SDK reads them from headers,
// whose names it writes in its own case.
func fromPtrs(mp map[string]*string) map[string]string {
	out := make(map[string]string, len(mp))
	for k, v := range mp {
		if v != nil {
			out[strings.ToLower(k)] = *v
		}
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }
