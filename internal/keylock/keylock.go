// Package keylock holds a key's places across processes: a blob per key
// and place, whose lease is the place. A process that holds a lease
// renews it while it runs a message of the key, and releases it when it
// has none left to run; one that dies loses it when the lease expires.
//
// Taking a place costs one Lease Blob request (two, and a Put Blob, the
// first time a key's place is used anywhere: its blob is made then), and
// giving it up one more. A key with several places tries them from a
// random one on, one request each, until one is free; a pool's search
// (see Pool) lists its places first, one List Blobs, and tries only those
// not leased.
package keylock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/blobs"
)

// ErrHeld is matched by the error of Take when every place of the key is
// held by another process.
var ErrHeld = errors.New("every place of the key is held elsewhere")

// Locks are the places of the keys of one queue.
type Locks struct {
	b      blobs.Backend
	prefix string
	places int
	// lease is each lease's duration; renewals come every third of it.
	lease time.Duration
	// lost, if set, is told of a lease whose renewals failed until it
	// expired, or that the service says another holds now.
	lost func(key string, err error)

	// written is the metadata this process last wrote to a place's
	// blob, by blob name, with the ETag the write gave it: a place taken
	// again whose blob still has that ETag needs no read (see Lock.Meta).
	mu      sync.Mutex
	written map[string]writtenMeta
	// releasing holds, by blob name, the releases of this process's own
	// leases under way, each closed when its release is over: a take of
	// such a place waits for it rather than find it held and give up.
	releasing map[string]chan struct{}
	// listRefused is set once a listing was refused (a SAS without List):
	// searches try places at random from then on.
	listRefused atomic.Bool
}

// writtenMeta is metadata as written, and the ETag the blob had then.
type writtenMeta struct {
	etag string
	meta map[string]string
}

// rememberWritten bounds Locks.written: past it, it starts afresh.
const rememberWritten = 4096

// New returns the places of the keys of scope (a prefix of blob names,
// such as "keys/<queue>") in b, places of each, leased for lease (15 to
// 60 s) at a time.
func New(b blobs.Backend, scope string, places int, lease time.Duration, lost func(key string, err error)) *Locks {
	return &Locks{b: b, prefix: scope + "/", places: max(places, 1), lease: lease, lost: lost}
}

// Lock is a place held: renewed until Release.
type Lock struct {
	locks *Locks
	key   string
	name  string
	id    string

	// base carries the values of the context the place was taken with
	// (the caller's transaction counts, say), not its end: the renewals
	// and a release made on the place's own account use it.
	base context.Context
	// meta is the blob's metadata, once read or written; etag is the
	// blob's ETag as the acquire found it.
	meta map[string]string
	etag string

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	renewal sync.WaitGroup // one in flight
	expires time.Time      // by the local clock: the lease's end if no renewal succeeds
}

// Take takes a place of key: from a random one on, the first free. It
// gives an error matching ErrHeld when every place is held elsewhere, or
// the error of a request that failed. The place that request was for is
// not held: an acquire whose answer was lost after it took effect is
// released (and the client's own retries of it, under the same lease ID,
// take the lease as the holder's).
func (ls *Locks) Take(ctx context.Context, key string) (*Lock, error) {
	return ls.take(ctx, key, ls.places)
}

// take is Take trying at most tries places.
func (ls *Locks) take(ctx context.Context, key string, tries int) (*Lock, error) {
	first := mrand.IntN(ls.places)
	places := make([]int, min(tries, ls.places))
	for i := range places {
		places[i] = (first + i) % ls.places
	}
	return ls.takeAmong(ctx, key, places)
}

// takeListed takes a place of key among those a listing says are free
// (not leased, or not made yet), trying at most tries of them at random:
// one List Blobs, then an acquire each. Where most places are held, as in
// a pool whose places are all in use but one, it finds the free one where
// tries at random would mostly find held ones.
func (ls *Locks) takeListed(ctx context.Context, key string, tries int) (*Lock, error) {
	if ls.listRefused.Load() {
		return ls.take(ctx, key, tries)
	}
	prefix := ls.keyPrefix(key)
	held := make([]bool, ls.places)
	err := ls.b.List(ctx, prefix, func(page []blobs.Info, _ time.Time) error {
		for _, info := range page {
			i, err := strconv.Atoi(strings.TrimPrefix(info.Name, prefix))
			if err == nil && i >= 0 && i < ls.places {
				held[i] = info.Leased
			}
		}
		return nil
	})
	if blobs.IsForbidden(err) {
		// A credential that may lease but not list (the blob SAS a
		// listener needs without limits): tries at random still find a
		// place, at more requests each.
		ls.listRefused.Store(true)
		return ls.take(ctx, key, tries)
	}
	if err != nil {
		return nil, err
	}
	var free []int
	for i, h := range held {
		if !h {
			free = append(free, i)
		}
	}
	mrand.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	return ls.takeAmong(ctx, key, free[:min(tries, len(free))])
}

// takeAmong takes the first of key's places that is free, trying them in
// the order given.
func (ls *Locks) takeAmong(ctx context.Context, key string, places []int) (*Lock, error) {
	for _, i := range places {
		name := ls.blobName(key, i)
		l := &Lock{locks: ls, key: key, name: name, id: blobs.NewLeaseID(), base: context.WithoutCancel(ctx)}
		err := l.acquire(ctx)
		if over := ls.releaseOf(name); errors.Is(err, blobs.ErrLeased) && over != nil {
			// Held by this process, which is giving it up: once more
			// when it has (a message of the key that came just after
			// the last one ended).
			select {
			case <-over:
				err = l.acquire(ctx)
			case <-ctx.Done():
			}
		}
		switch {
		case err == nil:
			l.mu.Lock()
			l.timer = time.AfterFunc(ls.lease/3, l.renew)
			l.mu.Unlock()
			return l, nil
		case !errors.Is(err, blobs.ErrLeased):
			// An acquire whose answer was lost may have taken the lease:
			// give it up, so that the key is not held until it expires.
			l.giveUp()
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %d of %d place(s) of the key tried", ErrHeld, len(places), ls.places)
}

// acquire takes l's lease, making its blob first if it is missing.
func (l *Lock) acquire(ctx context.Context) error {
	start := time.Now()
	info, err := l.locks.b.AcquireLease(ctx, l.name, l.id, l.locks.lease)
	if errors.Is(err, blobs.ErrNotFound) {
		_, err = l.locks.b.Create(ctx, l.name, blobs.Write{Metadata: map[string]string{"azdispatchkey": "1"}})
		if err != nil && !errors.Is(err, blobs.ErrConflict) { // made by another meanwhile: fine
			return err
		}
		start = time.Now()
		info, err = l.locks.b.AcquireLease(ctx, l.name, l.id, l.locks.lease)
	}
	if err == nil {
		l.expires = start.Add(l.locks.lease)
		l.etag = info.ETag
	}
	return err
}

// Meta returns the metadata of the place's blob: the state its holders
// keep there. It is read once per take, with one Get Blob Properties,
// unless this process wrote it last and nobody has since.
func (l *Lock) Meta(ctx context.Context) (map[string]string, error) {
	if l.meta != nil {
		return l.meta, nil
	}
	ls := l.locks
	ls.mu.Lock()
	w, ok := ls.written[l.name]
	ls.mu.Unlock()
	if ok && w.etag != "" && w.etag == l.etag {
		l.meta = w.meta
		return l.meta, nil
	}
	info, err := ls.b.Properties(ctx, l.name)
	if err != nil {
		return nil, err
	}
	l.meta = info.Metadata
	if l.meta == nil {
		l.meta = map[string]string{}
	}
	return l.meta, nil
}

// SetMeta replaces the metadata of the place's blob, under its lease: one
// Set Blob Metadata. A lease lost meanwhile gives an error matching
// blobs.ErrLeased, and nothing is written. Not safe for use by more than
// one goroutine at once, as the place is not.
func (l *Lock) SetMeta(ctx context.Context, meta map[string]string) error {
	info, err := l.locks.b.SetLeasedMetadata(ctx, l.name, meta, l.id)
	if err != nil {
		l.meta = nil // unknown now: read it again if asked
		return err
	}
	l.meta, l.etag = meta, info.ETag
	ls := l.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.written == nil || len(ls.written) >= rememberWritten {
		ls.written = map[string]writtenMeta{}
	}
	ls.written[l.name] = writtenMeta{etag: info.ETag, meta: meta}
	return nil
}

// renew renews the lease, and again a third of its duration later, until
// Release; a renewal that fails is tried again every second while the
// lease may still hold.
func (l *Lock) renew() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.renewal.Add(1)
	expires := l.expires
	l.mu.Unlock()
	defer l.renewal.Done()

	start := time.Now()
	ctx, cancel := context.WithTimeout(l.base, max(time.Until(expires), time.Second))
	_, err := l.locks.b.RenewLease(ctx, l.name, l.id)
	cancel()
	next := l.locks.lease / 3
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.expires = start.Add(l.locks.lease)
	case errors.Is(err, blobs.ErrLeased) || !time.Now().Before(l.expires):
		if l.locks.lost != nil {
			l.locks.lost(l.key, err)
		}
		return // lost: no more renewals
	default:
		next = time.Second
	}
	if !l.stopped {
		l.timer.Reset(next)
	}
}

// Release stops the renewals and gives the place up, so that another
// process may take it at once. A release that fails leaves the lease to
// expire.
func (l *Lock) Release(ctx context.Context) error { return l.Releasing()(ctx) }

// Releasing notes now that l is being released, so that a take of its
// place in this process from now on waits for the release rather than
// find the place held, and returns the release itself, which may run on
// another goroutine.
func (l *Lock) Releasing() (release func(ctx context.Context) error) {
	over := l.locks.releaseBegins(l.name)
	return func(ctx context.Context) error {
		defer over()
		return l.release(ctx)
	}
}

func (l *Lock) release(ctx context.Context) error {
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	l.mu.Unlock()
	l.renewal.Wait()
	_, err := l.locks.b.ReleaseLease(ctx, l.name, l.id)
	if err != nil && ctx.Err() == nil {
		// Once more: a place left held keeps the key from every other
		// process until its lease expires.
		_, err = l.locks.b.ReleaseLease(ctx, l.name, l.id)
	}
	return err
}

// releaseBegins notes a release of name's lease under way, until the
// function it returns is called.
func (ls *Locks) releaseBegins(name string) (over func()) {
	ch := make(chan struct{})
	ls.mu.Lock()
	if ls.releasing == nil {
		ls.releasing = map[string]chan struct{}{}
	}
	ls.releasing[name] = ch
	ls.mu.Unlock()
	return func() {
		ls.mu.Lock()
		if ls.releasing[name] == ch {
			delete(ls.releasing, name)
		}
		ls.mu.Unlock()
		close(ch)
	}
}

// releaseOf is the release of name's lease under way in this process, if
// any: closed when it is over.
func (ls *Locks) releaseOf(name string) <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.releasing[name]
}

// giveUpWithin bounds the release of a lease whose acquire failed.
const giveUpWithin = 5 * time.Second

// giveUp releases a lease l may hold after its acquire failed, and says
// nothing of how it went: the lease expires anyway.
func (l *Lock) giveUp() {
	ctx, cancel := context.WithTimeout(l.base, giveUpWithin)
	defer cancel()
	_, _ = l.locks.b.ReleaseLease(ctx, l.name, l.id)
}

// Key is the key l is a place of.
func (l *Lock) Key() string { return l.key }

// blobName is the blob of key's place i: the key hashed, so that any key
// makes a valid blob name of a fixed length.
func (ls *Locks) blobName(key string, i int) string {
	return ls.keyPrefix(key) + strconv.Itoa(i)
}

// keyPrefix is what the names of key's places begin with.
func (ls *Locks) keyPrefix(key string) string {
	sum := sha256.Sum256([]byte(key))
	return ls.prefix + hex.EncodeToString(sum[:20]) + "/"
}
