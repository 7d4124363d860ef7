package azdispatch

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// defaultSweepGrace is how long Sweep keeps a payload past the expiry of the
// message that pointed at it, unless told otherwise.
const defaultSweepGrace = time.Hour

// SweepOptions narrow a Sweep. Nil means defaults.
type SweepOptions struct {
	// Grace is how long after its message's expiry a payload is kept. It
	// covers the time between writing a blob and its pointer's send
	// completing (a send may be retried for minutes). Clock skew between
	// machines needs none: a payload's age is measured on the service's
	// clock alone (see Sweep). Defaults to an hour.
	Grace time.Duration
	// Queue, if set, limits the sweep to payloads sent to that queue.
	Queue string
	// DryRun lists and judges the payloads but deletes none: Deleted then
	// counts the payloads a sweep would remove now. It costs only the
	// listing.
	DryRun bool
}

// SweepResult counts what a Sweep found.
type SweepResult struct {
	Scanned  int // blobs listed
	Deleted  int // payloads no message can point at any more, removed (with DryRun, to be removed)
	Live     int // payloads a live message may point at: kept
	Poisoned int // payloads a poison envelope points at: kept
	Foreign  int // blobs this package did not write (no payload metadata): never touched
}

// Sweep removes the payload blobs that no message can point at any more:
// those left by a process that died between deleting a message and deleting
// its blob, and by a send that failed after its blob was written.
//
// The rule needs no look at any queue (a queue cannot be searched by
// content): every payload blob records, in its metadata, the time to live of
// the message that points at it, which the service enforces; once the blob
// is older than that, plus Grace, no live message points at it.
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
// Payloads of messages that never expire (a negative PublisherOptions.TTL)
// are never swept. Payloads held by a poison envelope are marked when they
// are poisoned and never swept, since an envelope does not expire and
// Requeue may send the pointer again; they are deleted when their requeued
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
			case !meta.Poisoned.IsZero():
				res.Poisoned++
				continue
			case !sweepDue(meta, item.Properties, page.Date, o.Grace):
				res.Live++
				continue
			case o.DryRun:
				res.Deleted++
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
			case bloberror.HasCode(err, bloberror.BlobNotFound):
				// Deleted meanwhile: by its listener, or another sweeper.
			case bloberror.HasCode(err, bloberror.ConditionNotMet):
				res.Live++ // changed since the listing (marked poisoned, or checkpointed): look again next time
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
	if written == nil {
		written = props.LastModified
	}
	ttl := meta.Expires.Sub(meta.Created) // both on the publisher's clock: its skew cancels
	if written == nil || ttl < 0 {
		return false
	}
	return !now.Before(written.Add(ttl).Add(grace))
}
