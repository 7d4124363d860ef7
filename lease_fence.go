package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

// leaseFenceMeta names the lease blob's metadata entry that holds the
// fence of its latest holder.
const leaseFenceMeta = "fence"

// errBadFence: the lease blob's fence entry is not a positive number.
// Counting again from 1 could hand out a number already used, so a
// contender gives up instead.
var errBadFence = errors.New("the lease blob's fence is not a positive number")

// leaseFenceKey is the context key under which Run hands fn its fence.
type leaseFenceKey struct{}

// LeaseFence returns the fencing token of the lease held for the function
// that Lease.Run called with ctx (or with a context ctx derives from), and
// false for any other context.
//
// The fence is the lease's generation: each time any contender takes the
// lease, its fence is greater than every fence handed out before, by any
// contender. A fence counts from 1.
//
// A lease alone cannot keep two holders from overlapping. A holder paused
// past its lease (a long garbage collection, a stopped process, a frozen
// virtual machine) resumes with its function still running after another
// process took the lease; nothing runs during the pause to cancel its
// context, and a check of ctx just before a write cannot rule out a pause
// just after the check. Only writes that the storage refuses from an older
// holder are safe, and the fence is what lets it refuse them: carry it into
// every write that must not come from two holders at once.
//
//   - Store the fence of the latest writer beside the data: in a blob's
//     metadata, an entity's property, a column.
//   - Write only if the stored fence is not greater than yours, and make the
//     write conditional on the data being unchanged since you read that
//     fence (If-Match with the ETag you read; a compare-and-set in SQL), so
//     that a newer holder writing in between makes your write fail.
//   - Treat a refused write as the lease lost: return from the function.
//
// Writes that do not check the fence are not protected: a paused holder
// makes them after its successor started. See the example.
//
// The fence is kept in the lease blob's metadata. Deleting that blob starts
// the count again from 1, and data fenced with the old numbers then refuses
// the new holders until the count passes them.
func LeaseFence(ctx context.Context) (int64, bool) {
	f, ok := ctx.Value(leaseFenceKey{}).(int64)
	return f, ok
}

// advance sets the lease blob's fence to one more than the fence stored
// there, under the lease just acquired, and returns it.
//
// The write is conditional on the lease: a holder whose lease expired while
// it was between its read and its write (paused, say) is refused, and its
// successor, which read the same number, is the only one to use it. Run
// hands a fence to fn only once it is stored, so every fence a holder ever
// saw is stored, and a later holder reads it, or a greater one, and goes
// past it. A holder that dies, or fails, before or after its write never
// used the fence it wrote, so skipping it is harmless. If the write also
// finds the blob changed since the read (a retry of this very write that
// had succeeded, unseen), it reads again: the number can only grow.
func (l *Lease) advance(ctx context.Context) (int64, error) {
	for try := 0; ; try++ {
		props, err := l.blob.GetProperties(tagBlob(ctx, opBlobRead), nil)
		if err != nil {
			return 0, blobError(opBlobRead, l.path(), err)
		}
		meta, prev, err := splitFence(props.Metadata)
		if err != nil {
			return 0, fmt.Errorf("azdispatch: lease %s: %w", l.path(), err)
		}
		next := prev + 1
		meta[leaseFenceMeta] = to.Ptr(strconv.FormatInt(next, 10))
		_, err = l.blob.SetMetadata(tagBlob(ctx, opBlobWrite), meta, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions:    &blob.LeaseAccessConditions{LeaseID: l.client.LeaseID()},
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: props.ETag},
		}})
		switch {
		case err == nil:
			return next, nil
		case !bloberror.HasCode(err, bloberror.ConditionNotMet) || try == 2:
			return 0, blobError(opBlobWrite, l.path(), err)
		}
	}
}

// splitFence returns the blob's metadata without its fence entry, and that
// fence (0 if there is none yet). The service may return metadata names in
// any case, so the name matches case-insensitively.
func splitFence(mp map[string]*string) (map[string]*string, int64, error) {
	rest := make(map[string]*string, len(mp)+1)
	var fence int64
	for name, v := range mp {
		if !strings.EqualFold(name, leaseFenceMeta) {
			rest[name] = v
			continue
		}
		var err error
		if v == nil {
			return nil, 0, fmt.Errorf("%w: empty", errBadFence)
		}
		if fence, err = strconv.ParseInt(*v, 10, 64); err != nil || fence < 1 {
			return nil, 0, fmt.Errorf("%w: %q", errBadFence, *v)
		}
	}
	return rest, fence, nil
}
