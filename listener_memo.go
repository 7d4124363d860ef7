package azdispatch

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// handledMemoSize bounds the messages a listener remembers as handled but
// not deleted: about 80 bytes each plus the IDs, under a megabyte. A
// message forgotten past it is only handled once more, as at-least-once
// allows.
const handledMemoSize = 10_000

// handledMemo remembers messages whose handler succeeded, from the moment
// it returned until their delete succeeds, so that a message that comes
// back meanwhile (its delete slow or failing, under sustained throttling
// say) is deleted without running its handler again, and a message that
// keeps failing only to be deleted is never poisoned for it. It remembers
// the same way messages copied to the poison queue and not yet deleted, so
// that they are deleted, not poisoned twice.
//
// A message is known by its ID, and checked against a hash of its text, so
// that a message ID reused with other text (a Source of one's own may) is
// not mistaken for it. It is bounded: past handledMemoSize the entry
// remembered longest ago is forgotten. Entries live in one slice, linked
// in the order they were remembered, and are reused once forgotten: the
// memo allocates nothing per message once it has grown.
type handledMemo struct {
	seed maphash.Seed

	size atomic.Int64 // len(index), read without the lock

	mu      sync.Mutex
	index   map[string]int32 // ID to entry
	entries []memoEntry
	oldest  int32 // the entry remembered longest ago; -1 if none
	newest  int32
	free    int32 // a forgotten entry to reuse; -1 if none
}

// memoEntry is one remembered message, in the list from oldest to newest
// (or, once forgotten, in the free list, through next).
type memoEntry struct {
	id         string
	text       uint64
	as         settledAs
	prev, next int32
}

// settledAs is what had become of a remembered message.
type settledAs uint8

const (
	settledHandled  settledAs = iota + 1 // its handler succeeded
	settledPoisoned                      // it was copied to the poison queue
)

func newHandledMemo() *handledMemo {
	return &handledMemo{seed: maphash.MakeSeed(), index: map[string]int32{}, oldest: -1, newest: -1, free: -1}
}

// remember records what became of d.
func (m *handledMemo) remember(d *Delivery, as settledAs) {
	text := maphash.String(m.seed, d.Text)
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, ok := m.index[d.ID]; ok {
		e := &m.entries[i]
		e.text, e.as = text, as
		return
	}
	var i int32
	switch {
	case m.free >= 0:
		i = m.free
		m.free = m.entries[i].next
	case len(m.entries) < handledMemoSize:
		m.entries = append(m.entries, memoEntry{})
		i = int32(len(m.entries) - 1)
	default:
		i = m.oldest
		m.unlink(i)
		delete(m.index, m.entries[i].id)
	}
	m.entries[i] = memoEntry{id: d.ID, text: text, as: as, prev: m.newest, next: -1}
	if m.newest >= 0 {
		m.entries[m.newest].next = i
	} else {
		m.oldest = i
	}
	m.newest = i
	m.index[d.ID] = i
	m.size.Store(int64(len(m.index)))
}

// settled reports what became of d before, if it is remembered; 0 if not.
// While nothing is remembered it costs one atomic load.
func (m *handledMemo) settled(d *Delivery) settledAs {
	if m.size.Load() == 0 {
		return 0
	}
	m.mu.Lock()
	i, ok := m.index[d.ID]
	var e memoEntry
	if ok {
		e = m.entries[i]
	}
	m.mu.Unlock()
	if !ok || e.text != maphash.String(m.seed, d.Text) {
		return 0
	}
	return e.as
}

// forget drops d once it is deleted.
func (m *handledMemo) forget(d *Delivery) {
	if m.size.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.index[d.ID]
	if !ok {
		return
	}
	m.unlink(i)
	delete(m.index, d.ID)
	m.entries[i] = memoEntry{next: m.free}
	m.free = i
	m.size.Store(int64(len(m.index)))
}

// unlink takes entry i out of the list from oldest to newest. The caller
// holds m.mu.
func (m *handledMemo) unlink(i int32) {
	e := &m.entries[i]
	if e.prev >= 0 {
		m.entries[e.prev].next = e.next
	} else {
		m.oldest = e.next
	}
	if e.next >= 0 {
		m.entries[e.next].prev = e.prev
	} else {
		m.newest = e.prev
	}
}
