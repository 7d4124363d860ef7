package azdispatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/svcclock"
)

// defaultPayloadContainer is the blob container, one per account, that holds
// the offloaded payloads of every queue in the account. One container rather
// than one per queue: a queue name may take 56 of a container name's 63
// characters, so "<queue>-payloads" would not fit, and one container is
// created once and swept with one listing. Each blob's metadata names the
// queue it was sent to.
const defaultPayloadContainer = "azdispatch-payloads"

// PayloadStore is the blob container where publishers offload batches and
// large messages and where listeners read them back. It is safe for
// concurrent use. The container is created the first time a write finds it
// missing, so a store in use costs no request of its own.
type PayloadStore struct {
	client *container.Client
	name   string
	retry  policy.RetryOptions // the account's, for downloads to adapt
	stall  payload.Stall
	clock  *svcclock.Clock // the account's: the service's time
}

// Payloads returns the account's default payload store, the container
// "azdispatch-payloads". It makes no request. It fails with
// [ErrNoBlobService] when the account's blob service is unknown.
func (a *Account) Payloads() (*PayloadStore, error) {
	return a.PayloadStore(defaultPayloadContainer)
}

// PayloadStore returns a payload store in the named container of this
// account (3 to 63 lowercase letters, digits and single inner hyphens).
// Publishers and listeners of a queue must use the same one.
func (a *Account) PayloadStore(containerName string) (*PayloadStore, error) {
	if err := validateName("container name", containerName, 0); err != nil {
		return nil, err
	}
	svc, err := a.blobService()
	if err != nil {
		return nil, err
	}
	return &PayloadStore{client: svc.NewContainerClient(containerName), name: containerName, retry: a.retry, stall: payload.DefaultStall, clock: a.clock}, nil
}

// Container is the store's container name.
func (s *PayloadStore) Container() string { return s.name }

// PayloadStore implements [PayloadStorer]: the store of the queue's account
// (see [Account.Payloads]); nil for a queue opened by its own SAS URL, or
// through an account whose blob service is unknown.
func (q *Queue) PayloadStore() *PayloadStore {
	if q.account == nil {
		return nil
	}
	s, err := q.account.Payloads()
	if err != nil {
		return nil
	}
	return s
}

// PayloadLimits bound what is offloaded and what a listener reads back, so
// that a hostile or broken pointer cannot make a listener download, inflate
// or decode without limit. A zero field means its default. A publisher
// refuses, before any request, a payload a listener with the same limits
// would poison.
type PayloadLimits struct {
	// MaxBlobSize bounds a payload blob's stored (gzip) size; a listener
	// holds one blob of each batch in progress in memory. Defaults to 64 MiB.
	MaxBlobSize int64
	// MaxExpandedSize bounds a payload's size once decompressed, which stops
	// gzip bombs: the listener stops reading past it. Defaults to 256 MiB.
	MaxExpandedSize int64
	// MaxItemSize bounds one item's encoded text (or a single large
	// message's), the most a listener decodes at once. Defaults to 16 MiB.
	MaxItemSize int
	// MaxItems bounds the items of one batch. Defaults to 1,000,000.
	MaxItems int
}

// withDefaults fills zero fields and checks the rest; field names the
// struct's place in its options, for errors.
func (l PayloadLimits) withDefaults(field string) (PayloadLimits, error) {
	full, err := payload.Limits(l).WithDefaults()
	if err != nil {
		return l, &ConfigError{Field: field, Reason: err.Error()}
	}
	return PayloadLimits(full), nil
}

// put writes data as a new payload blob and returns the pointer to it. The
// container is created if the write finds it missing.
//
// The pointer does not say its container or expanded size yet: listeners
// of earlier versions refuse a pointer with fields they do not know, and
// would poison the message and let its blob be swept. This version reads
// both; a later one writes them, once listeners that read them run
// everywhere.
func (s *PayloadStore) put(ctx context.Context, meta payload.Meta, data []byte) (*payload.Pointer, error) {
	meta.Writer = payload.NewWriterToken()
	sum := sha256.Sum256(data)
	p := &payload.Pointer{Kind: meta.Kind, Blob: payload.NewBlobID(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Items: meta.Items}
	bb := s.client.NewBlockBlobClient(p.Blob)
	opts := &blockblob.UploadOptions{
		Metadata:    meta.ToMap(),
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/gzip")},
		// Never overwrite: a blob id is random, and a collision must fail.
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}},
	}
	upload := func() error {
		_, err := bb.Upload(tagBlob(ctx, opBlobWrite), readSeekNopCloser{bytes.NewReader(data)}, opts)
		return err
	}
	err := upload()
	if err != nil && bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if err := s.createContainer(ctx); err != nil {
			return nil, err
		}
		err = upload()
	}
	if err != nil && bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) {
		// A random name taken: this write's own, whose answer was lost
		// and which the SDK retried, if the blob carries its token.
		if m, _, perr := s.properties(ctx, p.Blob); perr == nil && m.Writer == meta.Writer {
			err = nil
		}
	}
	if err != nil {
		return nil, s.err(opBlobWrite, p.Blob, err)
	}
	return p, nil
}

// fetched is a payload blob read back and checked against its pointer.
type fetched struct {
	data []byte // the blob's bytes (gzip)
	meta payload.Meta
	etag azcore.ETag
}

// fetch reads the blob p names, reading no more than p.Size bytes, and
// checks its size and SHA-256. Errors match [ErrPayloadMissing] or
// [ErrPayloadCorrupt], or are [*StorageError] for a request that failed (which
// may succeed if tried again).
func (s *PayloadStore) fetch(ctx context.Context, p *payload.Pointer) (*fetched, error) {
	// A download is bounded by its progress, not by the account's per-try
	// timeout: a 64 MiB payload over a 1 MB/s link takes a minute, and a
	// fixed 30 s limit would fail it on every try until it was poisoned.
	ctx, done := s.stall.Watch(ctx, p.Size)
	defer done()
	retry := s.retry
	retry.TryTimeout = 0
	ctx = policy.WithRetryOptions(ctx, retry)
	resp, err := s.client.NewBlobClient(p.Blob).DownloadStream(tagBlob(ctx, opBlobRead), nil)
	if err != nil {
		err = s.stall.Explain(ctx, err)
		if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			return nil, fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.name, p.Blob)
		}
		return nil, s.err(opBlobRead, p.Blob, err)
	}
	defer resp.Body.Close()
	if n := deref(resp.ContentLength); n != p.Size {
		return nil, fmt.Errorf("%w: %s is %d bytes, the pointer says %d", ErrPayloadCorrupt, p.Blob, n, p.Size)
	}
	// Exactly the size the pointer gives, read in place: a buffer that
	// grows as it reads would copy the payload once or twice on the way.
	data := make([]byte, p.Size)
	body := s.stall.Count(ctx, resp.Body)
	if n, err := io.ReadFull(body, data); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The response said p.Size bytes (checked above): a body that
			// ends sooner is a connection that broke, not a blob that is
			// short, and the next try may read it whole.
			err = fmt.Errorf("the response ended after %d of its %d bytes: %w", n, p.Size, err)
		}
		return nil, s.err(opBlobRead, p.Blob, s.stall.Explain(ctx, err))
	}
	// One byte more tells a longer body from a correct one without
	// reading the rest of it.
	if k, _ := io.ReadFull(body, make([]byte, 1)); k > 0 {
		return nil, fmt.Errorf("%w: %s is longer than the pointer's %d bytes", ErrPayloadCorrupt, p.Blob, p.Size)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != p.SHA256 {
		return nil, fmt.Errorf("%w: %s does not match the pointer's SHA-256", ErrPayloadCorrupt, p.Blob)
	}
	f := &fetched{data: data, etag: deref(resp.ETag)}
	meta, ok := payload.ParseMeta(resp.Metadata)
	if ok && payload.IsRecord(meta.Kind) {
		// A record's bytes are public (a hostile pointer could name one
		// with its hash): a payload it is not.
		return nil, fmt.Errorf("%w: %s is a %s record, not a payload", ErrPayloadCorrupt, p.Blob, meta.Kind)
	}
	if !ok {
		// The bytes are the publisher's (the hash says so); only the
		// metadata is off. Keep going without a checkpoint.
		meta = payload.Meta{Kind: p.Kind, Items: p.Items, Created: time.Now()}
	}
	f.meta = meta
	return f, nil
}

// properties reads a payload blob's metadata and ETag.
func (s *PayloadStore) properties(ctx context.Context, id string) (payload.Meta, azcore.ETag, error) {
	resp, err := s.client.NewBlobClient(id).GetProperties(tagBlob(ctx, opBlobRead), nil)
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			return payload.Meta{}, "", fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.name, id)
		}
		return payload.Meta{}, "", s.err(opBlobRead, id, err)
	}
	meta, ok := payload.ParseMeta(resp.Metadata)
	if !ok {
		return payload.Meta{}, "", fmt.Errorf("%w: %s has no payload metadata", ErrPayloadCorrupt, id)
	}
	return meta, deref(resp.ETag), nil
}

// update rewrites a blob's metadata with change applied, if the blob still
// has the ETag etag; on a conflict it reads the metadata again and retries,
// so two writers never undo each other's change. It returns the new ETag.
func (s *PayloadStore) update(ctx context.Context, id string, meta payload.Meta, etag azcore.ETag, change func(*payload.Meta)) (azcore.ETag, error) {
	for try := 0; ; try++ {
		m := meta
		change(&m)
		opts := &blob.SetMetadataOptions{}
		if etag != "" {
			opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}
		}
		resp, err := s.client.NewBlobClient(id).SetMetadata(tagBlob(ctx, opBlobWrite), m.ToMap(), opts)
		switch {
		case err == nil:
			return deref(resp.ETag), nil
		case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
			return "", fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.name, id)
		case !bloberror.HasCode(err, bloberror.ConditionNotMet) || try == 2:
			return "", s.err(opBlobWrite, id, err)
		}
		if meta, etag, err = s.properties(ctx, id); err != nil {
			return "", err
		}
	}
}

// markPoisoned records on a blob that a poison envelope holds its pointer,
// so that [Sweep] keeps it for as long as the envelope may be requeued.
func (s *PayloadStore) markPoisoned(ctx context.Context, id string, now time.Time) error {
	meta, etag, err := s.properties(ctx, id)
	if err != nil {
		return err
	}
	if !meta.Poisoned.IsZero() {
		return nil
	}
	_, err = s.update(ctx, id, meta, etag, func(m *payload.Meta) { m.Poisoned = now })
	return err
}

// remove deletes a payload blob whose message is gone. A blob already
// missing is not an error.
func (s *PayloadStore) remove(ctx context.Context, id string) error {
	_, err := s.client.NewBlobClient(id).Delete(tagBlob(ctx, opBlobDelete), nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		return s.err(opBlobDelete, id, err)
	}
	return nil
}

// err wraps a failed blob request.
func (s *PayloadStore) err(o Op, id string, err error) error {
	return blobError(o, s.name+"/"+id, err)
}

type readSeekNopCloser struct{ io.ReadSeeker }

func (readSeekNopCloser) Close() error { return nil }

// defaultSweepGrace is how long [Sweep] keeps a payload past the expiry of the
// message that pointed at it, unless told otherwise.
const defaultSweepGrace = time.Hour

// SweepOptions narrow a [Sweep]. Nil means defaults.
type SweepOptions struct {
	// Grace is how long after its message's expiry a payload is kept. It
	// covers the time between writing a blob and its pointer's send
	// completing (a send may be retried for minutes). Clock skew between
	// machines needs none: a payload's age is measured on the service's
	// clock alone (see [Sweep]). Defaults to an hour.
	Grace time.Duration
	// Queue, if set, limits the sweep to payloads sent to that queue.
	Queue string
	// DryRun lists and judges the payloads but deletes none: [SweepResult.Deleted] then
	// counts the payloads a sweep would remove now. It costs only the
	// listing.
	DryRun bool
}

// SweepResult counts what a [Sweep] found.
type SweepResult struct {
	Scanned  int // blobs listed
	Deleted  int // payloads no message can point at any more, removed (with DryRun, to be removed)
	Live     int // payloads a live message may point at: kept
	Poisoned int // payloads a poison envelope points at: kept
	Foreign  int // blobs this package did not write (no payload metadata): never touched

	// Of Deleted, Live and Poisoned: their bytes (as listed), and how many
	// were batches and records (of cancels, unique keys, schedules and
	// occurrences); the rest are claim-checked messages.
	DeletedBytes, LiveBytes, PoisonedBytes int64
	Batches, Records                       int
}

// count adds a payload blob of kind and size to res's kinds.
func (res *SweepResult) count(kind string, size int64, bytes *int64) {
	*bytes += size
	switch {
	case kind == payload.KindBatch:
		res.Batches++
	case payload.IsRecord(kind):
		res.Records++
	}
}

// Sweep removes the payload blobs that no message can point at any more:
// those left by a process that died between deleting a message and deleting
// its blob, and by a send that failed after its blob was written.
//
// The rule needs no look at any queue (a queue cannot be searched by
// content): every payload blob records, in its metadata, the time to live of
// the message that points at it, which the service enforces; once the blob
// is older than that, plus [SweepOptions.Grace], no live message points at it.
//
// No machine's clock enters that decision, so clock skew between publisher
// and sweeper cannot delete a live payload. The time to live is the
// difference of the two times the publisher recorded (when it wrote the
// blob and when the message expires), both read on its clock, so its skew
// cancels out. The blob's age is read on the service's clock: its creation
// time in the listing (or its Last-Modified, which a metadata update only
// moves later, the safe direction) against the Date of the listing's
// response. A payload whose times are missing from the listing is kept.
//
// Payloads of messages that never expire (a negative [PublisherOptions.TTL])
// are never swept. Payloads held by a poison envelope are marked when they
// are poisoned and never swept, since an envelope does not expire and
// [Requeue] may send the pointer again; they are deleted when their requeued
// message completes. Each delete is conditional on the blob being unchanged
// since the listing, so a blob marked poisoned meanwhile is kept.
//
// Sweep costs one List Blobs request per 5,000 blobs and one Delete Blob per
// blob removed. It is safe to run from several processes at once.
func Sweep(ctx context.Context, store *PayloadStore, opts *SweepOptions) (SweepResult, error) {
	var o SweepOptions
	if opts != nil {
		o = *opts
	}
	if o.Grace < 0 {
		return SweepResult{}, &ConfigError{Field: "SweepOptions.Grace", Reason: "negative"}
	}
	setDefault(&o.Grace, defaultSweepGrace)
	var res SweepResult
	pager := store.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Include: container.ListBlobsInclude{Metadata: true},
	})
	for pager.More() {
		page, err := pager.NextPage(tagBlob(ctx, opBlobList))
		if err != nil {
			if bloberror.HasCode(err, bloberror.ContainerNotFound) {
				return res, nil // nothing was ever offloaded
			}
			return res, store.err(opBlobList, "", err)
		}
		if page.Segment == nil {
			continue
		}
		for _, item := range page.Segment.BlobItems {
			if item == nil || item.Name == nil {
				continue
			}
			res.Scanned++
			meta, ok := payload.ParseMeta(item.Metadata)
			switch {
			case !ok || !payload.IsLowerHex(*item.Name, payload.BlobIDLen):
				res.Foreign++
				continue
			case o.Queue != "" && meta.Queue != o.Queue:
				continue
			}
			var size int64
			if item.Properties != nil && item.Properties.ContentLength != nil {
				size = *item.Properties.ContentLength
			}
			switch {
			case !meta.Poisoned.IsZero():
				res.Poisoned++
				res.count(meta.Kind, size, &res.PoisonedBytes)
				continue
			case !sweepDue(meta, item.Properties, page.Date, o.Grace):
				res.Live++
				res.count(meta.Kind, size, &res.LiveBytes)
				continue
			case o.DryRun:
				res.Deleted++
				res.count(meta.Kind, size, &res.DeletedBytes)
				continue
			}
			var cond *blob.AccessConditions
			if item.Properties != nil && item.Properties.ETag != nil {
				cond = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: item.Properties.ETag}}
			}
			_, err := store.client.NewBlobClient(*item.Name).Delete(tagBlob(ctx, opBlobDelete), &blob.DeleteOptions{AccessConditions: cond})
			switch {
			case err == nil:
				res.Deleted++
				res.count(meta.Kind, size, &res.DeletedBytes)
			case bloberror.HasCode(err, bloberror.BlobNotFound):
				// Deleted meanwhile: by its listener, or another sweeper.
			case bloberror.HasCode(err, bloberror.ConditionNotMet):
				res.Live++ // changed since the listing (marked poisoned, or checkpointed): look again next time
				res.count(meta.Kind, size, &res.LiveBytes)
			default:
				return res, store.err(opBlobDelete, *item.Name, err)
			}
		}
	}
	return res, nil
}

// sweepDue reports whether the message that could point at a payload has
// expired, plus grace, by the service's clock: now is the listing's Date,
// props the blob's properties in that listing. Anything missing, or a time
// to live that does not make sense, keeps the payload.
func sweepDue(meta payload.Meta, props *container.BlobProperties, now *time.Time, grace time.Duration) bool {
	if meta.Expires.IsZero() || props == nil || now == nil {
		return false
	}
	written := props.CreationTime
	if written == nil || payload.IsRecord(meta.Kind) {
		// A record is rewritten whole when taken over: its life runs
		// from its last write.
		written = props.LastModified
	}
	ttl := meta.Expires.Sub(meta.Created) // both on the publisher's clock: its skew cancels
	if written == nil || ttl < 0 {
		return false
	}
	return !now.Before(written.Add(ttl).Add(grace))
}
