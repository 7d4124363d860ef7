// Package blobs is the one layer every blob of the library goes through:
// payloads, records, marks and groups' tallies (append blobs). A [Backend] is a container of blobs with the
// few requests they need, each conditional where a race could lose a
// write, and each answer carrying the service's time. Two backends
// implement it: [Azure], a container of the Azure blob service, and
// [Memory], a container in memory on a clock of the caller's, with fault
// hooks, so that everything built on blobs runs without an emulator.
//
// Errors that callers decide on match a few sentinels ([ErrNotFound],
// [ErrConflict]) with errors.Is; the service's own error stays reachable
// behind them (errors.As to an *azcore.ResponseError).
package blobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// ErrNotFound is matched by the error of a request whose blob, or whose
// container, does not exist.
var ErrNotFound = errors.New("blob not found")

// ErrConflict is matched by the error of a conditional request whose
// condition failed: a create that found the blob there (If-None-Match: *),
// a replace, update or delete that found it changed or gone since its ETag
// was read (If-Match).
var ErrConflict = errors.New("blob exists or changed")

// ErrLeased is matched by the error of a lease request on a blob whose
// lease another holder has (an acquire that finds it taken, a renewal or
// release of a lease that was lost), and of a delete of a leased blob.
var ErrLeased = errors.New("blob leased by another holder")

// MaxBlocks is the most blocks an append blob holds, as the service
// counts them.
const MaxBlocks = 50_000

// Op is the kind of a request, as the library counts and names requests:
// the same strings as azdispatch.Op.
type Op string

// The kinds of request a Backend makes.
const (
	OpRead   Op = "blob read"   // Get Blob, Get Blob Properties
	OpWrite  Op = "blob write"  // Put Blob, Append Block, Set Blob Metadata, Create Container
	OpDelete Op = "blob delete" // Delete Blob
	OpList   Op = "blob list"   // List Blobs
	OpLease  Op = "blob lease"  // Lease Blob: acquire, renew, release
)

// Info is what an answer says of a blob, and of itself.
type Info struct {
	Name     string
	Metadata map[string]string // as written; names in lower case
	ETag     string
	Size     int64     // its content's length
	Created  time.Time // when it was first written; zero if not told
	Modified time.Time // its last write, to the second
	// Blocks is, in an Append's answer, how many blocks the append blob
	// holds now, the one appended included; 0 in other answers.
	Blocks int
	// Leased says, in a List's answer, that the blob was under a lease
	// that had not expired or been released; false in other answers.
	Leased bool
	// Date is the answer's Date: the service's time when it answered, to
	// the second. Zero if the answer carried none.
	Date time.Time
}

// Write is a blob to write.
type Write struct {
	Data        []byte
	Metadata    map[string]string
	ContentType string
}

// Backend is a container of blobs. Its methods are safe for concurrent
// use. A write that finds the container missing creates it and tries
// again, once.
type Backend interface {
	// Container is the container's name.
	Container() string
	// Create writes a new blob, if none of that name exists
	// (If-None-Match: *); one that does gives ErrConflict.
	Create(ctx context.Context, name string, w Write) (Info, error)
	// Replace overwrites a blob if it still has etag (If-Match); one
	// changed or gone gives ErrConflict.
	Replace(ctx context.Context, name string, w Write, etag string) (Info, error)
	// SetMetadata replaces a blob's metadata, keeping its content, if it
	// still has etag (any, if etag is empty). A missing blob gives
	// ErrNotFound; a changed one ErrConflict.
	SetMetadata(ctx context.Context, name string, meta map[string]string, etag string) (Info, error)
	// SetLeasedMetadata replaces the metadata of a blob leased under
	// lease, keeping its content and its lease. A blob not leased under
	// it (leased by another, or by no one any more) gives ErrLeased; a
	// missing one ErrNotFound.
	SetLeasedMetadata(ctx context.Context, name string, meta map[string]string, lease string) (Info, error)
	// Read opens a blob's content; the caller closes it. Info.Size is its
	// length.
	Read(ctx context.Context, name string) (io.ReadCloser, Info, error)
	// Properties reads a blob's metadata and ETag.
	Properties(ctx context.Context, name string) (Info, error)
	// Delete removes a blob, if it still has etag (any, if etag is
	// empty). A missing one gives ErrNotFound; a changed one ErrConflict.
	Delete(ctx context.Context, name, etag string) (Info, error)
	// List calls page with the blobs whose names start with prefix, with
	// their metadata, a page at a time (in name order), and the Date of
	// the page's answer; an error of page ends the listing with it. A
	// missing container lists nothing.
	List(ctx context.Context, prefix string, page func(blobs []Info, date time.Time) error) error
	// CreateContainer creates the container; one that exists is fine.
	CreateContainer(ctx context.Context) error

	// CreateAppend makes an empty append blob with meta, if none of that
	// name exists (If-None-Match: *); one that does gives ErrConflict.
	CreateAppend(ctx context.Context, name string, meta map[string]string) (Info, error)
	// Append adds data as one block at the end of an append blob, and
	// says in Info.Blocks how many blocks it holds then. Blocks from
	// several writers at once are kept whole and in some order. A block
	// appended again after its answer was lost is there twice: what is
	// appended must be safe to read twice. A missing blob gives
	// ErrNotFound; the service holds at most MaxBlocks blocks.
	Append(ctx context.Context, name string, data []byte) (Info, error)

	// AcquireLease takes a lease for d (15 to 60 s, as the service
	// takes them) on a blob, under id, a holder's own lease ID. A lease
	// already held under id is taken again, for d from now: an acquire
	// tried again after its answer was lost recognises its own lease. A
	// blob leased under another ID gives ErrLeased; a missing one
	// ErrNotFound.
	AcquireLease(ctx context.Context, name, id string, d time.Duration) (Info, error)
	// RenewLease renews the lease held under id for its duration from
	// now. A lease lost meanwhile (expired and taken by another, or
	// released) gives ErrLeased.
	RenewLease(ctx context.Context, name, id string) (Info, error)
	// ReleaseLease gives up the lease held under id, so that another may
	// take it at once. A blob not leased under id gives nil: its lease was
	// released already (by a release tried again after its answer was
	// lost) or lost; either way id holds nothing. (The service answers the
	// first with 409 LeaseNotPresentWithLeaseOperation, Azurite with 409
	// LeaseIdMismatchWithLeaseOperation, as for a lease another holds.)
	ReleaseLease(ctx context.Context, name, id string) (Info, error)
}

// IsForbidden reports whether err is the service's 403: a credential that
// lacks a permission, a resource type or the service (a SAS without List,
// say). It stands until the credential changes.
func IsForbidden(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}

// NewLeaseID returns a random lease ID, in the GUID form the service takes.
func NewLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
