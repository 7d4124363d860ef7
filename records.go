package azdispatch

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/svcclock"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/timetable"
)

// recordKeeper is a source or target that keeps records of its own (a
// memqueue.Queue, in memory on its clock).
type recordKeeper interface {
	Records() records.Store
}

// recordsOf is where records about v's messages are kept: its own, or
// blobs in store; nil if neither.
func recordsOf(v any, store *PayloadStore) records.Store {
	if k, ok := v.(recordKeeper); ok {
		return k.Records()
	}
	if store != nil {
		return &blobRecords{store: store}
	}
	return nil
}

// blobRecords keeps records as blobs of a payload store: the value in the
// body, the kind and life in metadata (as a sweep reads them), the
// version in the ETag, and the service's clock from each answer's Date.
type blobRecords struct {
	store *PayloadStore
	clock svcclock.Clock
}

// Read implements records.Store: one Get Blob.
func (b *blobRecords) Read(ctx context.Context, name string) (*records.Record, error) {
	s := b.store
	resp, err := s.client.NewBlobClient(name).DownloadStream(tagBlob(ctx, opBlobRead), nil)
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			return nil, fmt.Errorf("%w: %s/%s", records.ErrMissing, s.name, name)
		}
		return nil, s.err(opBlobRead, name, err)
	}
	defer resp.Body.Close()
	b.clock.Saw(resp.Date)
	value, err := io.ReadAll(io.LimitReader(resp.Body, records.MaxValue+1))
	if err != nil {
		return nil, s.err(opBlobRead, name, err)
	}
	meta, ok := payload.ParseMeta(resp.Metadata)
	if !ok || !payload.IsRecord(meta.Kind) || len(value) > records.MaxValue {
		return nil, fmt.Errorf("%w: %s/%s is not a record", ErrPayloadCorrupt, s.name, name)
	}
	r := &records.Record{Kind: meta.Kind, Value: value, Version: string(deref(resp.ETag)), Written: deref(resp.LastModified), Now: deref(resp.Date)}
	if !meta.Expires.IsZero() {
		r.Life = meta.Expires.Sub(meta.Created)
	}
	return r, nil
}

// Write implements records.Store: one Put Blob, If-None-Match: * or
// If-Match its version; the container is created if missing.
func (b *blobRecords) Write(ctx context.Context, name string, r *records.Record) error {
	if len(r.Value) > records.MaxValue {
		return fmt.Errorf("azdispatch: record %s: value of %d bytes, more than %d", name, len(r.Value), records.MaxValue)
	}
	cond := &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	if r.Version != "" {
		cond = &blob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(r.Version))}
	}
	// Created and Expires are only a life for a sweep: both this
	// machine's, so that its clock cancels out (see sweepDue).
	now := time.Now()
	meta := payload.Meta{Kind: r.Kind, Created: now}
	if r.Life > 0 {
		meta.Expires = now.Add(r.Life)
	}
	s := b.store
	upload := func() (blockblob.UploadResponse, error) {
		return s.client.NewBlockBlobClient(name).Upload(tagBlob(ctx, opBlobWrite), readSeekNopCloser{bytes.NewReader(r.Value)}, &blockblob.UploadOptions{
			Metadata:         meta.ToMap(),
			HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: to.Ptr("application/json")},
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
		})
	}
	resp, err := upload()
	if err != nil && r.Version == "" && bloberror.HasCode(err, bloberror.ContainerNotFound) {
		_, cerr := s.client.Create(tagBlob(ctx, opBlobWrite), nil)
		if cerr != nil && !bloberror.HasCode(cerr, bloberror.ContainerAlreadyExists) {
			return s.err(opBlobWrite, "", cerr)
		}
		resp, err = upload()
	}
	switch {
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet, bloberror.BlobNotFound, bloberror.ContainerNotFound):
		return fmt.Errorf("%w: %s/%s", records.ErrChanged, s.name, name)
	case err != nil:
		return s.err(opBlobWrite, name, err)
	}
	b.clock.Saw(resp.Date)
	r.Version, r.Written, r.Now = string(deref(resp.ETag)), deref(resp.LastModified), deref(resp.Date)
	return nil
}

// Now implements records.Store.
func (b *blobRecords) Now() time.Time { return b.clock.Now() }

// Sleep implements records.Store.
func (b *blobRecords) Sleep(ctx context.Context, until time.Time, wake <-chan struct{}) bool {
	return syncx.Sleep(ctx, until.Sub(b.Now()), wake)
}

// Schedules lists the state of every schedule whose [Scheduler] keeps it in
// this store, by queue and name: one List Blobs request per 5,000 blobs of
// the container, and one read per schedule.
func (s *PayloadStore) Schedules(ctx context.Context) ([]ScheduleState, error) {
	var states []ScheduleState
	b := &blobRecords{store: s}
	pager := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}})
	for pager.More() {
		page, err := pager.NextPage(tagBlob(ctx, opBlobList))
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return nil, nil
		}
		if err != nil {
			return states, s.err(opBlobList, "", err)
		}
		for _, item := range page.Segment.BlobItems {
			if item == nil || item.Name == nil {
				continue
			}
			if meta, ok := payload.ParseMeta(item.Metadata); !ok || meta.Kind != payload.KindSchedule {
				continue
			}
			r, err := b.Read(ctx, *item.Name)
			if errors.Is(err, records.ErrMissing) {
				continue // removed since the listing
			}
			if err != nil {
				return states, err
			}
			st, err := timetable.DecodeState(r.Value)
			if err != nil {
				return states, fmt.Errorf("%w: %s/%s: %w", ErrPayloadCorrupt, s.name, *item.Name, err)
			}
			states = append(states, stateOf(st))
		}
	}
	slices.SortFunc(states, func(a, b ScheduleState) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Name, b.Name))
	})
	return states, nil
}
