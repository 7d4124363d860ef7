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
// failing only to be deleted is never poisoned for it. A message is known
// by its ID and a hash of its text, so that a message ID reused with other
// text (a requeue from the poison queue makes a new ID anyway) is not
// mistaken for it. It is bounded: the oldest is forgotten first.
type handledMemo struct {
	seed maphash.Seed

	size atomic.Int64 // len(keys), read without the lock

	mu    sync.Mutex
	keys  map[memoKey]struct{}
	order []memoKey // a ring, oldest at next
	next  int
}

type memoKey struct {
	id   string
	text uint64
}

func newHandledMemo() *handledMemo {
	return &handledMemo{seed: maphash.MakeSeed(), keys: map[memoKey]struct{}{}}
}

func (m *handledMemo) key(d *Delivery) memoKey {
	return memoKey{id: d.ID, text: maphash.String(m.seed, d.Text)}
}

// remember records d as handled.
func (m *handledMemo) remember(d *Delivery) {
	k := m.key(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[k]; ok {
		return
	}
	if len(m.order) < handledMemoSize {
		m.order = append(m.order, k)
	} else {
		delete(m.keys, m.order[m.next])
		m.order[m.next] = k
		m.next = (m.next + 1) % handledMemoSize
	}
	m.keys[k] = struct{}{}
	m.size.Store(int64(len(m.keys)))
}

// handled reports whether d was handled before. While nothing is
// remembered, which is nearly always, it costs one atomic load.
func (m *handledMemo) handled(d *Delivery) bool {
	if m.size.Load() == 0 {
		return false
	}
	k := m.key(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.keys[k]
	return ok
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
