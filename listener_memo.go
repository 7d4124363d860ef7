package azdispatch

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// handledMemoSize bounds the messages a listener remembers as handled but
// not deleted: about 40 bytes each plus the IDs, well under a megabyte. A
// message forgotten past it is only handled once more, as at-least-once
// allows.
const handledMemoSize = 10_000

// handledMemo remembers messages whose handler succeeded but whose delete
// failed (under sustained throttling, say), so that when one comes back it
// is deleted without running its handler again, and a message that keeps
// failing only to be deleted is never poisoned for it. It remembers the
// same way messages copied to the poison queue but not deleted, so that
// they are deleted, not poisoned twice. A message is known
// by its ID and a hash of its text, so that a message ID reused with other
// text (a requeue from the poison queue makes a new ID anyway) is not
// mistaken for it. It is bounded: the oldest is forgotten first.
type handledMemo struct {
	seed maphash.Seed

	size atomic.Int64 // len(keys), read without the lock

	mu    sync.Mutex
	keys  map[memoKey]settledAs
	order []memoKey // a ring, oldest at next
	next  int
}

type memoKey struct {
	id   string
	text uint64
}

// settledAs is what had become of a remembered message before its delete
// failed.
type settledAs uint8

const (
	settledHandled  settledAs = iota + 1 // its handler succeeded
	settledPoisoned                      // it was copied to the poison queue
)

func newHandledMemo() *handledMemo {
	return &handledMemo{seed: maphash.MakeSeed(), keys: map[memoKey]settledAs{}}
}

func (m *handledMemo) key(d *Delivery) memoKey {
	return memoKey{id: d.ID, text: maphash.String(m.seed, d.Text)}
}

// remember records what became of d.
func (m *handledMemo) remember(d *Delivery, as settledAs) {
	k := m.key(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[k]; ok {
		m.keys[k] = as
		return
	}
	if len(m.order) < handledMemoSize {
		m.order = append(m.order, k)
	} else {
		delete(m.keys, m.order[m.next])
		m.order[m.next] = k
		m.next = (m.next + 1) % handledMemoSize
	}
	m.keys[k] = as
	m.size.Store(int64(len(m.keys)))
}

// settled reports what became of d before, if it is remembered; 0 if not.
// While nothing is remembered, which is nearly always, it costs one atomic
// load.
func (m *handledMemo) settled(d *Delivery) settledAs {
	if m.size.Load() == 0 {
		return 0
	}
	k := m.key(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[k]
}

// forget drops d once it is deleted. Its slot in the ring stays until it
// comes round, and may then drop the same key remembered again since: the
// memo then forgets early, which costs at most one more handler call.
func (m *handledMemo) forget(d *Delivery) {
	if m.size.Load() == 0 {
		return
	}
	k := m.key(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, k)
	m.size.Store(int64(len(m.keys)))
}
