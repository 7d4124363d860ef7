package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/azdispatch/azdispatch"
)

// errStaleFence says that a newer lease holder has written the data.
var errStaleFence = errors.New("a newer lease holder wrote this data")

// fencedBlob is data that only the newest lease holder can write: the blob
// keeps the fence of its latest writer in its metadata, and a write is made
// only if that fence is not newer than the writer's, and only if the blob is
// unchanged since that was checked.
type fencedBlob struct{ blob *blockblob.Client }

// write stores data under fence, or fails with errStaleFence.
func (b fencedBlob) write(ctx context.Context, fence int64, data []byte) error {
	for {
		cond, err := b.check(ctx, fence)
		if err != nil {
			return err
		}
		err = b.put(ctx, fence, data, cond)
		if !bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists) {
			return err
		}
		// Written meanwhile, by a newer holder or an older one: look again.
	}
}

// check fails with errStaleFence if the fence stored with the data is newer
// than fence; otherwise it returns the condition that the blob is still as
// it was read.
func (b fencedBlob) check(ctx context.Context, fence int64) (*blob.AccessConditions, error) {
	props, err := b.blob.GetProperties(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound) {
		return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}, nil
	}
	if err != nil {
		return nil, err
	}
	for name, v := range props.Metadata { // the service may change a name's case
		if strings.EqualFold(name, "fence") && v != nil {
			if stored, err := strconv.ParseInt(*v, 10, 64); err != nil || stored > fence {
				return nil, errStaleFence
			}
		}
	}
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: props.ETag}}, nil
}

// put writes data and fence if cond, from check, still holds; the service
// refuses it with 412 ConditionNotMet (or 409 BlobAlreadyExists) otherwise.
func (b fencedBlob) put(ctx context.Context, fence int64, data []byte, cond *blob.AccessConditions) error {
	_, err := b.blob.UploadBuffer(ctx, data, &blockblob.UploadBufferOptions{
		Metadata:         map[string]*string{"fence": to.Ptr(strconv.FormatInt(fence, 10))},
		AccessConditions: cond,
	})
	return err
}

// A holder paused past its lease can resume and write after another process
// took the lease. Writes carrying the holder's fence are safe from that: the
// data keeps its latest writer's fence and refuses an older one.
func ExampleLeaseFence() {
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(connectionString(), nil)
	if err != nil {
		panic(err)
	}
	name := fmt.Sprintf("planner-%d", time.Now().UnixNano())
	lease, err := azdispatch.NewLease(account, name, nil)
	if err != nil {
		panic(err)
	}
	// The data the holder writes: here a blob, beside the lease blob.
	data, err := container.NewClientFromConnectionString(connectionString(), "azdispatch-leases", nil)
	if err != nil {
		panic(err)
	}
	plan := fencedBlob{blob: data.NewBlockBlobClient(name + "-plan")}

	err = lease.Run(ctx, func(ctx context.Context) error {
		fence, _ := azdispatch.LeaseFence(ctx)
		if err := plan.write(ctx, fence, []byte("plan A")); err != nil {
			return err // errStaleFence: a newer holder took over
		}
		fmt.Println("written with fence", fence)
		return nil
	})
	fmt.Println("done:", err)

	// What a holder with an older fence gets when it wakes up and writes:
	err = plan.write(ctx, 0, []byte("plan B"))
	fmt.Println("older holder:", err)
	// Output:
	// written with fence 1
	// done: <nil>
	// older holder: a newer lease holder wrote this data
}
