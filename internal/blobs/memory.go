package blobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/txcount"
)

// Hook is called before each request of a [Memory] backend, with its kind
// and its blob's name (empty for a listing or a container). A non-nil
// fail fails the request before it acts; lose lets it act, then fails it
// as if its answer had been lost on the way back (a write that took
// effect, which its caller will try again). A hook that blocks until ctx
// ends is a store that hangs.
type Hook func(ctx context.Context, op Op, name string) (fail error, lose bool)

// Memory is a [Backend] in memory: one container, on a clock of the
// caller's, with the service's conditions and times (ETags that change on
// every write, Last-Modified and Date to the second). It is safe for
// concurrent use.
type Memory struct {
	name string
	now  func() time.Time
	hook Hook

	mu      sync.Mutex
	blobs   map[string]*memBlob
	version uint64

	requests [txcount.NumOps]atomic.Int64
}

// memBlob is one blob as stored.
type memBlob struct {
	data              []byte
	meta              map[string]string
	etag              string
	created, modified time.Time
	// lease is the ID of its lease, if one was taken and not released;
	// it is active until leaseEnd, and leaseFor is its duration.
	lease    string
	leaseEnd time.Time
	leaseFor time.Duration
	// blocks counts an append blob's blocks; appendable says it is one.
	blocks     int
	appendable bool
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty container called name whose clock is now
// (time.Now if nil). hook, if not nil, may fail, hang or lose requests.
func NewMemory(name string, now func() time.Time, hook Hook) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{name: name, now: now, hook: hook, blobs: map[string]*memBlob{}}
}

// Requests returns how many requests of kind op the backend was asked
// for, refused and lost ones included: what the service would bill.
func (m *Memory) Requests(op Op) int64 { return m.requests[txcount.Named(string(op))].Load() }

// Container implements [Backend].
func (m *Memory) Container() string { return m.name }

// Create implements [Backend].
func (m *Memory) Create(ctx context.Context, name string, w Write) (Info, error) {
	return m.write(ctx, name, func(old *memBlob) error {
		if old != nil {
			return fmt.Errorf("%w: %s/%s exists", ErrConflict, m.name, name)
		}
		return nil
	}, w.Data, w.Metadata, true)
}

// CreateAppend implements [Backend].
func (m *Memory) CreateAppend(ctx context.Context, name string, meta map[string]string) (Info, error) {
	return m.put(ctx, name, func(old *memBlob) error {
		if old != nil {
			return fmt.Errorf("%w: %s/%s exists", ErrConflict, m.name, name)
		}
		return nil
	}, nil, meta, true, true)
}

// Append implements [Backend].
func (m *Memory) Append(ctx context.Context, name string, data []byte) (Info, error) {
	lose, err := m.before(ctx, OpWrite, name)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.blobs[name]
	switch {
	case old == nil:
		return Info{}, fmt.Errorf("%w: %s/%s", ErrNotFound, m.name, name)
	case !old.appendable:
		return Info{}, fmt.Errorf("memory blob: %s/%s is not an append blob (409 InvalidBlobType)", m.name, name)
	case old.blocks == MaxBlocks:
		return Info{}, fmt.Errorf("memory blob: %s/%s holds %d blocks (409 BlockCountExceedsLimit)", m.name, name, MaxBlocks)
	}
	now := m.now()
	m.version++
	b := *old
	b.data = append(bytes.Clone(old.data), data...)
	b.blocks++
	b.etag, b.modified = fmt.Sprintf(`"0x%X"`, m.version), now
	m.blobs[name] = &b
	if lose {
		return Info{}, lost(OpWrite, name)
	}
	info := m.info(name, &b, now)
	info.Blocks = b.blocks
	return info, nil
}

// Replace implements [Backend].
func (m *Memory) Replace(ctx context.Context, name string, w Write, etag string) (Info, error) {
	return m.write(ctx, name, func(old *memBlob) error {
		if old == nil || old.etag != etag {
			return fmt.Errorf("%w: %s/%s is not at ETag %s", ErrConflict, m.name, name, etag)
		}
		return nil
	}, w.Data, w.Metadata, true)
}

// SetMetadata implements [Backend].
func (m *Memory) SetMetadata(ctx context.Context, name string, meta map[string]string, etag string) (Info, error) {
	return m.write(ctx, name, func(old *memBlob) error {
		switch {
		case old == nil:
			return fmt.Errorf("%w: %s/%s", ErrNotFound, m.name, name)
		case etag != "" && old.etag != etag:
			return fmt.Errorf("%w: %s/%s is not at ETag %s", ErrConflict, m.name, name, etag)
		case old.lease != "" && m.now().Before(old.leaseEnd):
			// The service refuses it without the lease's ID (412).
			return fmt.Errorf("%w: %s/%s", ErrLeased, m.name, name)
		}
		return nil
	}, nil, meta, false)
}

// SetLeasedMetadata implements [Backend].
func (m *Memory) SetLeasedMetadata(ctx context.Context, name string, meta map[string]string, lease string) (Info, error) {
	return m.write(ctx, name, func(old *memBlob) error {
		switch {
		case old == nil:
			return fmt.Errorf("%w: %s/%s", ErrNotFound, m.name, name)
		case old.lease != lease || !m.now().Before(old.leaseEnd):
			return fmt.Errorf("%w: %s/%s is not leased under %s", ErrLeased, m.name, name, lease)
		}
		return nil
	}, nil, meta, false)
}

// write stores a blob if check passes on the one there (nil if none):
// with data if withData, else keeping the old data (and what kind of
// blob it is).
func (m *Memory) write(ctx context.Context, name string, check func(*memBlob) error, data []byte, meta map[string]string, withData bool) (Info, error) {
	return m.put(ctx, name, check, data, meta, withData, false)
}

// put is write, for an append blob if appendable.
func (m *Memory) put(ctx context.Context, name string, check func(*memBlob) error, data []byte, meta map[string]string, withData, appendable bool) (Info, error) {
	lose, err := m.before(ctx, OpWrite, name)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.blobs[name]
	if err := check(old); err != nil {
		return Info{}, err
	}
	now := m.now()
	m.version++
	b := &memBlob{meta: lowerKeys(meta), etag: fmt.Sprintf(`"0x%X"`, m.version), created: now, modified: now, appendable: appendable}
	switch {
	case withData:
		b.data = bytes.Clone(data)
	case old != nil:
		b.data, b.blocks, b.appendable = old.data, old.blocks, old.appendable
	}
	if old != nil {
		b.created = old.created
		b.lease, b.leaseEnd, b.leaseFor = old.lease, old.leaseEnd, old.leaseFor
	}
	m.blobs[name] = b
	if lose {
		return Info{}, lost(OpWrite, name)
	}
	return m.info(name, b, now), nil
}

// Read implements [Backend].
func (m *Memory) Read(ctx context.Context, name string) (io.ReadCloser, Info, error) {
	info, data, err := m.get(ctx, name)
	if err != nil {
		return nil, Info{}, err
	}
	return io.NopCloser(bytes.NewReader(data)), info, nil
}

// Properties implements [Backend].
func (m *Memory) Properties(ctx context.Context, name string) (Info, error) {
	info, _, err := m.get(ctx, name)
	return info, err
}

func (m *Memory) get(ctx context.Context, name string) (Info, []byte, error) {
	lose, err := m.before(ctx, OpRead, name)
	if err != nil {
		return Info{}, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.blobs[name]
	switch {
	case b == nil:
		return Info{}, nil, fmt.Errorf("%w: %s/%s", ErrNotFound, m.name, name)
	case lose:
		return Info{}, nil, lost(OpRead, name)
	}
	return m.info(name, b, m.now()), b.data, nil
}

// Delete implements [Backend].
func (m *Memory) Delete(ctx context.Context, name, etag string) (Info, error) {
	lose, err := m.before(ctx, OpDelete, name)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.blobs[name]
	switch {
	case b == nil:
		return Info{}, fmt.Errorf("%w: %s/%s", ErrNotFound, m.name, name)
	case etag != "" && b.etag != etag:
		return Info{}, fmt.Errorf("%w: %s/%s is not at ETag %s", ErrConflict, m.name, name, etag)
	case b.lease != "" && m.now().Before(b.leaseEnd):
		// The service refuses it without the lease's ID (412).
		return Info{}, fmt.Errorf("%w: %s/%s", ErrLeased, m.name, name)
	}
	delete(m.blobs, name)
	if lose {
		return Info{}, lost(OpDelete, name)
	}
	return Info{Name: name, Date: second(m.now())}, nil
}

// listPage is how many blobs a page of a listing holds, as the service's.
const listPage = 5000

// List implements [Backend]: a page is read under the lock, and handed
// over outside it.
func (m *Memory) List(ctx context.Context, prefix string, page func([]Info, time.Time) error) error {
	after := ""
	for {
		lose, err := m.before(ctx, OpList, "")
		if err != nil {
			return err
		}
		m.mu.Lock()
		names := slices.Sorted(maps.Keys(m.blobs))
		now := m.now()
		var infos []Info
		for _, name := range names {
			if len(infos) == listPage {
				break
			}
			if name > after && strings.HasPrefix(name, prefix) {
				b := m.blobs[name]
				info := m.info(name, b, now)
				info.Leased = b.lease != "" && now.Before(b.leaseEnd)
				infos = append(infos, info)
			}
		}
		m.mu.Unlock()
		if lose {
			return lost(OpList, "")
		}
		if len(infos) > 0 {
			if err := page(infos, second(now)); err != nil {
				return err
			}
		}
		if len(infos) < listPage {
			return nil
		}
		after = infos[len(infos)-1].Name
	}
}

// CreateContainer implements [Backend]: a memory container always exists,
// but the request is made (and may fail) as the service's would be.
func (m *Memory) CreateContainer(ctx context.Context) error {
	lose, err := m.before(ctx, OpWrite, "")
	if err == nil && lose {
		err = lost(OpWrite, "")
	}
	return err
}

// AcquireLease implements [Backend].
func (m *Memory) AcquireLease(ctx context.Context, name, id string, d time.Duration) (Info, error) {
	return m.lease(ctx, name, func(b *memBlob, now time.Time) error {
		if b.lease != "" && b.lease != id && now.Before(b.leaseEnd) {
			return fmt.Errorf("%w: %s/%s", ErrLeased, m.name, name)
		}
		b.lease, b.leaseEnd, b.leaseFor = id, now.Add(d), d
		return nil
	})
}

// RenewLease implements [Backend]: a lease that expired renews if no one
// took it since, as the service's does.
func (m *Memory) RenewLease(ctx context.Context, name, id string) (Info, error) {
	return m.lease(ctx, name, func(b *memBlob, now time.Time) error {
		if b.lease != id {
			return fmt.Errorf("%w: %s/%s", ErrLeased, m.name, name)
		}
		b.leaseEnd = now.Add(b.leaseFor)
		return nil
	})
}

// ReleaseLease implements [Backend].
func (m *Memory) ReleaseLease(ctx context.Context, name, id string) (Info, error) {
	return m.lease(ctx, name, func(b *memBlob, now time.Time) error {
		if b.lease == id {
			b.lease, b.leaseEnd = "", time.Time{}
		}
		return nil // not held under id: released already, or lost
	})
}

// lease runs one lease request: change, on the blob as stored, at now.
func (m *Memory) lease(ctx context.Context, name string, change func(b *memBlob, now time.Time) error) (Info, error) {
	lose, err := m.before(ctx, OpLease, name)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.blobs[name]
	if b == nil {
		return Info{}, fmt.Errorf("%w: %s/%s", ErrNotFound, m.name, name)
	}
	now := m.now()
	if err := change(b, now); err != nil {
		return Info{}, err
	}
	if lose {
		return Info{}, lost(OpLease, name)
	}
	return m.info(name, b, now), nil
}

// before counts a request of kind op, then runs the hook: the error the
// request fails with before it acts, if any, and whether its answer is to
// be lost once it has.
func (m *Memory) before(ctx context.Context, op Op, name string) (lose bool, err error) {
	kind := txcount.Named(string(op))
	m.requests[kind].Add(1)
	txcount.Add(ctx, kind)
	if m.hook != nil {
		if err, lose = m.hook(ctx, op, name); err != nil {
			return false, err
		}
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return lose, nil
}

// info is what an answer at now says of b, called name.
func (m *Memory) info(name string, b *memBlob, now time.Time) Info {
	return Info{
		Name: name, Metadata: maps.Clone(b.meta), ETag: b.etag, Size: int64(len(b.data)),
		Created: second(b.created), Modified: second(b.modified), Date: second(now),
	}
}

// lost is the error of a request whose answer was lost after it acted.
func lost(op Op, name string) error {
	return fmt.Errorf("memory blob: the answer to %s %s was lost: %w", op, name, context.DeadlineExceeded)
}

// second is t as the service reports a time: UTC, to the second.
func second(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// lowerKeys copies meta with its names in lower case, as the service
// returns them.
func lowerKeys(meta map[string]string) map[string]string {
	out := make(map[string]string, len(meta))
	for k, v := range meta {
		out[strings.ToLower(k)] = v
	}
	return out
}
