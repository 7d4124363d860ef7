package azdispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/codec"
	"github.com/azdispatch/azdispatch/internal/group"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/track"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// Codec turns values into message text and back. Listeners decode with
// Decode(text, &body), publishers encode with Encode(body). The codecs of
// this package are stateless and safe for concurrent use.
type Codec interface {
	Encode(v any) (string, error)
	Decode(text string, v any) error
}

// JSON returns the default codec: the value as JSON text. HTML characters
// (<, >, &) are written as they are, not as \u003c escapes, because the
// service counts message size before XML escaping and the escapes would cost
// six bytes each. A string that is not valid UTF-8, which encoding/json
// would silently turn into U+FFFD, is refused with an error matching
// [ErrInvalidText], as every codec of this package refuses it: for bytes,
// use a []byte field (base64 in JSON) or [Raw] with [Base64].
//
// A [Listener] keeps its JSON decoders from one message to the next, rather
// than make one per message, when nothing but encoding/json reads the
// text: when its body type reaches no UnmarshalJSON or UnmarshalText
// method (those of [time.Time] and [encoding/json.RawMessage] excepted,
// which only read). A method of your own is given bytes of its own, so
// that it may do with them what it likes. Either way a text is accepted,
// refused and decoded as json.Unmarshal does.
func JSON() Codec { return codec.JSON{} }

// Base64 wraps inner so that the message text is the base64 of inner's text.
// Use Base64([JSON]()) to exchange messages with the Azure Functions and WebJobs
// queue trigger, which expects base64 by default, and Base64([Raw]()) for
// binary []byte payloads. Base64 costs a third more size.
func Base64(inner Codec) Codec { return codec.Base64{Inner: inner} }

// Raw returns a codec for string and []byte bodies, stored as they are.
// The text must be valid XML character data (see [ErrInvalidText]); sending
// anything else fails before any request is made.
func Raw() Codec { return rawCodec{} }

// rawCodec is [codec.Raw] with its refusals as a [ConfigError]: a body
// type it cannot take is a mistake in the program, not in a message.
type rawCodec struct{}

func (rawCodec) Encode(v any) (string, error) {
	s, err := codec.Raw{}.Encode(v)
	return s, typeRefused(err)
}

func (rawCodec) Decode(text string, v any) error { return typeRefused(codec.Raw{}.Decode(text, v)) }

func typeRefused(err error) error {
	var te *codec.TypeError
	if errors.As(err, &te) {
		return &ConfigError{Field: "value", Reason: te.Reason}
	}
	return err
}

// checkCodecType tells, before any message arrives, whether c can decode
// into *T. Only the raw codec is picky; other codecs report errors per
// message.
func checkCodecType[T any](c Codec) error {
	switch x := c.(type) {
	case rawCodec:
		var probe T
		return x.Decode("", &probe)
	case codec.Base64:
		return checkCodecType[T](x.Inner)
	}
	return nil
}

// bodyDecoder is the codec a listener of T decodes with: c, or, for the
// default JSON and a T whose decoding runs no code but encoding/json's,
// the same JSON with decoders kept from one message to the next.
func bodyDecoder[T any](c Codec) Codec {
	if _, ok := c.(codec.JSON); ok && codec.Poolable(reflect.TypeFor[T]()) {
		return codec.NewPooledJSON()
	}
	return c
}

// DefaultPayloadContainer is the blob container, one per account, that holds
// the offloaded payloads of every queue in the account. One container rather
// than one per queue: a queue name may take 56 of a container name's 63
// characters, so "<queue>-payloads" would not fit, and one container is
// created once and swept with one listing. Each blob's metadata names the
// queue it was sent to.
const DefaultPayloadContainer = "azdispatch-payloads"

// PayloadStore is the blob container where publishers offload batches and
// large messages and where listeners read them back; the records of
// cancels, unique keys and schedules live there too. It is safe for
// concurrent use. The container is created the first time a write finds
// it missing, so a store in use costs no request of its own.
//
// A store is a container of an account's blob service ([Account.Payloads],
// [Account.PayloadStore]) or one in memory ([NewMemoryPayloadStore]), which
// a memqueue.Queue offers.
type PayloadStore struct {
	blobs   blobs.Backend
	records *records.Blobs // the store's records, on its blobs and its clock
	// groups are the store's groups, whose failed requests are the
	// store's own errors (see recordErr).
	groups *group.Store
	retry  policy.RetryOptions // the account's, for downloads to adapt
	stall  payload.Stall
}

// newPayloadStore is the store on backend b, whose records are judged on
// clock.
func newPayloadStore(b blobs.Backend, clock records.Clock, retry policy.RetryOptions) *PayloadStore {
	s := &PayloadStore{blobs: b, retry: retry, stall: payload.DefaultStall}
	s.records = records.OnBlobs(b, clock, s.recordErr)
	s.groups = group.New(blobs.Described(b, s.recordErr), "groups/", nil)
	return s
}

// PayloadStore returns a payload store in the named container of this
// account (3 to 63 lowercase letters, digits and single inner hyphens), or
// "" for the account's default, [DefaultPayloadContainer], which its queues use
// (see [Queue.PayloadStore]). Publishers and listeners of a queue must use
// the same one. It makes no request. It fails with [ErrNoBlobService] when
// the account's blob service is unknown.
func (a *Account) PayloadStore(containerName string) (*PayloadStore, error) {
	if containerName == "" {
		containerName = DefaultPayloadContainer
	}
	if err := validateName("container name", containerName, 0); err != nil {
		return nil, err
	}
	svc, err := a.blobService()
	if err != nil {
		return nil, err
	}
	b := blobs.NewAzure(svc.NewContainerClient(containerName), containerName, func(ctx context.Context, o blobs.Op) context.Context { return tagBlob(ctx, Op(o)) })
	// Records are judged on the service's clock, which every answer of the
	// account's sets (see svcclock.Policy).
	return newPayloadStore(b, records.NewClock(a.clock.Now, a.clock.Known, nil), a.retry), nil
}

// MemoryPayloadStoreOptions configures [NewMemoryPayloadStore]. Nil, or a
// zero field, means the default.
type MemoryPayloadStoreOptions struct {
	// Now is the store's clock, which stands for the service's: the
	// records' times, and the payloads' ages for [Sweep]. Defaults to the
	// system's clock.
	Now func() time.Time
	// Moved, if set, subscribes wake to every move of a clock that moves
	// only when told to (a memqueue.ManualClock), so that what waits on the
	// store's clock (a scheduler, a listener holding a message due soon)
	// follows it. Without it, waits run on real time.
	Moved func(wake func()) (cancel func())
	// Intercept, if set, is called before every request on the store with
	// its kind (a blob [Op]: "blob read", "blob write", "blob delete",
	// "blob list") and its blob's name (empty for a listing): fail, if not
	// nil, fails the request before it acts; lose lets it act, then fails
	// it as if its answer had been lost. One that blocks until ctx ends is
	// a store that hangs.
	Intercept func(ctx context.Context, op Op, blob string) (fail error, lose bool)
}

// NewMemoryPayloadStore returns an empty payload store in memory, with the
// service's conditions and times, under the container name given (as
// pointers name it): what a memqueue.Queue offers, so that claim checks,
// batches, cancels, unique sends, long delays and schedules run without
// storage. Nil opts means defaults.
func NewMemoryPayloadStore(containerName string, opts *MemoryPayloadStoreOptions) (*PayloadStore, error) {
	if err := validateName("container name", containerName, 0); err != nil {
		return nil, err
	}
	var o MemoryPayloadStoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var hook blobs.Hook
	if o.Intercept != nil {
		hook = func(ctx context.Context, op blobs.Op, name string) (error, bool) {
			return o.Intercept(ctx, Op(op), name)
		}
	}
	b := blobs.NewMemory(containerName, o.Now, hook)
	return newPayloadStore(b, records.NewClock(o.Now, nil, o.Moved), policy.RetryOptions{}), nil
}

// Container is the store's container name.
func (s *PayloadStore) Container() string { return s.blobs.Container() }

// PayloadStore implements [PayloadStorer]: the store of the queue's account
// (see [Account.PayloadStore]); nil for a queue opened by its own SAS URL, or
// through an account whose blob service is unknown.
func (q *Queue) PayloadStore() *PayloadStore {
	if q.account == nil {
		return nil
	}
	s, err := q.account.PayloadStore("")
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
func (s *PayloadStore) put(ctx context.Context, meta payload.Meta, data []byte) (*wire.Pointer, error) {
	meta.Writer = payload.NewWriterToken()
	sum := sha256.Sum256(data)
	p := &wire.Pointer{Kind: meta.Kind, Blob: payload.NewBlobID(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Items: meta.Items}
	// Never overwrite: a blob id is random, and a collision must fail.
	_, err := s.blobs.Create(ctx, p.Blob, blobs.Write{Data: data, Metadata: meta.Strings(), ContentType: "application/gzip"})
	if errors.Is(err, blobs.ErrConflict) {
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
func (s *PayloadStore) fetch(ctx context.Context, p *wire.Pointer) (*fetched, error) {
	// A download is bounded by its progress, not by the account's per-try
	// timeout: a 64 MiB payload over a 1 MB/s link takes a minute, and a
	// fixed 30 s limit would fail it on every try until it was poisoned.
	ctx, done := s.stall.Watch(ctx, p.Size)
	defer done()
	retry := s.retry
	retry.TryTimeout = 0
	ctx = policy.WithRetryOptions(ctx, retry)
	body, info, err := s.blobs.Read(ctx, p.Blob)
	if err != nil {
		err = s.stall.Explain(ctx, err)
		if errors.Is(err, blobs.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.Container(), p.Blob)
		}
		return nil, s.err(opBlobRead, p.Blob, err)
	}
	defer body.Close()
	if info.Size != p.Size {
		return nil, fmt.Errorf("%w: %s is %d bytes, the pointer says %d", ErrPayloadCorrupt, p.Blob, info.Size, p.Size)
	}
	// Exactly the size the pointer gives, read in place: a buffer that
	// grows as it reads would copy the payload once or twice on the way.
	data := make([]byte, p.Size)
	counted := s.stall.Count(ctx, body)
	if n, err := io.ReadFull(counted, data); err != nil {
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
	if k, _ := io.ReadFull(counted, make([]byte, 1)); k > 0 {
		return nil, fmt.Errorf("%w: %s is longer than the pointer's %d bytes", ErrPayloadCorrupt, p.Blob, p.Size)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != p.SHA256 {
		return nil, fmt.Errorf("%w: %s does not match the pointer's SHA-256", ErrPayloadCorrupt, p.Blob)
	}
	f := &fetched{data: data, etag: azcore.ETag(info.ETag)}
	meta, ok := payload.ParseStrings(info.Metadata)
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
	info, err := s.blobs.Properties(ctx, id)
	if err != nil {
		if errors.Is(err, blobs.ErrNotFound) {
			return payload.Meta{}, "", fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.Container(), id)
		}
		return payload.Meta{}, "", s.err(opBlobRead, id, err)
	}
	meta, ok := payload.ParseStrings(info.Metadata)
	if !ok {
		return payload.Meta{}, "", fmt.Errorf("%w: %s has no payload metadata", ErrPayloadCorrupt, id)
	}
	return meta, azcore.ETag(info.ETag), nil
}

// update rewrites a blob's metadata with change applied, if the blob still
// has the ETag etag; on a conflict it reads the metadata again and retries,
// so two writers never undo each other's change. It returns the new ETag.
func (s *PayloadStore) update(ctx context.Context, id string, meta payload.Meta, etag azcore.ETag, change func(*payload.Meta)) (azcore.ETag, error) {
	for try := 0; ; try++ {
		m := meta
		change(&m)
		info, err := s.blobs.SetMetadata(ctx, id, m.Strings(), string(etag))
		switch {
		case err == nil:
			return azcore.ETag(info.ETag), nil
		case errors.Is(err, blobs.ErrNotFound):
			return "", fmt.Errorf("%w: %s/%s", ErrPayloadMissing, s.Container(), id)
		case !errors.Is(err, blobs.ErrConflict) || try == 2:
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
	_, err := s.blobs.Delete(ctx, id, "")
	if err != nil && !errors.Is(err, blobs.ErrNotFound) {
		return s.err(opBlobDelete, id, err)
	}
	return nil
}

// err wraps a failed blob request; one that failed with a [*StorageError]
// already (a memory store's fault hook) is returned as it is.
func (s *PayloadStore) err(o Op, id string, err error) error {
	var se *StorageError
	if errors.As(err, &se) {
		return err
	}
	return blobError(o, s.Container()+"/"+id, err)
}

// recordErr shapes the errors of the store's records as its own: a blob
// that is not a record is corrupt, a failed request a [*StorageError].
func (s *PayloadStore) recordErr(o blobs.Op, name string, err error) error {
	if errors.Is(err, records.ErrNotRecord) {
		return fmt.Errorf("%w: %s/%s is not a record", ErrPayloadCorrupt, s.Container(), name)
	}
	return s.err(Op(o), name, err)
}

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
	// were batches and records (of cancels, unique keys, schedules,
	// occurrences, groups and tracked messages' statuses); the rest are
	// claim-checked messages.
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
	err := store.blobs.List(ctx, "", func(page []blobs.Info, date time.Time) error {
		for _, item := range page {
			res.Scanned++
			meta, ok := payload.ParseStrings(item.Metadata)
			switch {
			case !ok || !store.sweepable(item.Name, meta.Kind):
				res.Foreign++
				continue
			case o.Queue != "" && meta.Queue != o.Queue:
				continue
			}
			switch {
			case !meta.Poisoned.IsZero():
				res.Poisoned++
				res.count(meta.Kind, item.Size, &res.PoisonedBytes)
				continue
			case !sweepDue(meta, item, date, o.Grace):
				res.Live++
				res.count(meta.Kind, item.Size, &res.LiveBytes)
				continue
			case o.DryRun:
				res.Deleted++
				res.count(meta.Kind, item.Size, &res.DeletedBytes)
				continue
			}
			_, err := store.blobs.Delete(ctx, item.Name, item.ETag)
			switch {
			case err == nil:
				res.Deleted++
				res.count(meta.Kind, item.Size, &res.DeletedBytes)
			case errors.Is(err, blobs.ErrNotFound):
				// Deleted meanwhile: by its listener, or another sweeper.
			case errors.Is(err, blobs.ErrConflict):
				res.Live++ // changed since the listing (marked poisoned, or checkpointed): look again next time
				res.count(meta.Kind, item.Size, &res.LiveBytes)
			default:
				return store.err(opBlobDelete, item.Name, err)
			}
		}
		return nil
	})
	var se *StorageError
	if err != nil && !errors.As(err, &se) {
		err = store.err(opBlobList, "", err)
	}
	return res, err
}

// sweepable reports whether name is one this store gives a blob of kind:
// a payload's or a record's ID, a group's head or shard, a tracked
// message's status. A blob of any other name is another writer's, whatever
// its metadata says.
func (s *PayloadStore) sweepable(name, kind string) bool {
	switch kind {
	case payload.KindGroup:
		return s.groups.Owns(name)
	case payload.KindStatus:
		return track.IsName(name)
	}
	return payload.IsLowerHex(name, payload.BlobIDLen)
}

// sweepDue reports whether the message that could point at a payload has
// expired, plus grace, by the service's clock: now is the listing's Date,
// props the blob's properties in that listing. Anything missing, or a time
// to live that does not make sense, keeps the payload.
func sweepDue(meta payload.Meta, item blobs.Info, now time.Time, grace time.Duration) bool {
	if meta.Expires.IsZero() || now.IsZero() {
		return false
	}
	written := item.Created
	if written.IsZero() || payload.IsRecord(meta.Kind) {
		// A record is rewritten whole when taken over: its life runs
		// from its last write.
		written = item.Modified
	}
	ttl := meta.Expires.Sub(meta.Created) // both on the publisher's clock: its skew cancels
	if written.IsZero() || ttl < 0 {
		return false
	}
	return !now.Before(written.Add(ttl).Add(grace))
}
