// Package keylock holds a key's places across processes: a blob per key
// and place, whose lease is the place. A process that holds a lease
// renews it while it runs a message of the key, and releases it when it
// has none left to run; one that dies loses it when the lease expires.
//
// Taking a place costs one Lease Blob request (two, and a Put Blob, the
// first time a key's place is used anywhere: its blob is made then), and
// giving it up one more. A key with several places tries them from a
// random one on, one request each, until one is free.
package keylock

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
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
}

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
	for i := range min(tries, ls.places) {
		name := ls.blobName(key, (first+i)%ls.places)
		l := &Lock{locks: ls, key: key, name: name, id: newLeaseID()}
		err := l.acquire(ctx)
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
	return nil, fmt.Errorf("%w: %d of %d place(s) of the key tried", ErrHeld, min(tries, ls.places), ls.places)
}

// acquire takes l's lease, making its blob first if it is missing.
func (l *Lock) acquire(ctx context.Context) error {
	start := time.Now()
	_, err := l.locks.b.AcquireLease(ctx, l.name, l.id, l.locks.lease)
	if errors.Is(err, blobs.ErrNotFound) {
		_, err = l.locks.b.Create(ctx, l.name, blobs.Write{Metadata: map[string]string{"azdispatchkey": "1"}})
		if err != nil && !errors.Is(err, blobs.ErrConflict) { // made by another meanwhile: fine
			return err
		}
		start = time.Now()
		_, err = l.locks.b.AcquireLease(ctx, l.name, l.id, l.locks.lease)
	}
	if err == nil {
		l.expires = start.Add(l.locks.lease)
	}
	return err
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
	ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(expires), time.Second))
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
func (l *Lock) Release(ctx context.Context) error {
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

// giveUpWithin bounds the release of a lease whose acquire failed.
const giveUpWithin = 5 * time.Second

// giveUp releases a lease l may hold after its acquire failed, and says
// nothing of how it went: the lease expires anyway.
func (l *Lock) giveUp() {
	ctx, cancel := context.WithTimeout(context.Background(), giveUpWithin)
	defer cancel()
	_, _ = l.locks.b.ReleaseLease(ctx, l.name, l.id)
}

// Key is the key l is a place of.
func (l *Lock) Key() string { return l.key }

// blobName is the blob of key's place i: the key hashed, so that any key
// makes a valid blob name of a fixed length.
func (ls *Locks) blobName(key string, i int) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("%s%s/%d", ls.prefix, hex.EncodeToString(sum[:20]), i)
}

// newLeaseID is a random lease ID, in the GUID form the service takes.
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
