// Package memo remembers messages a listener settled but has not yet
// deleted, so that one that comes back meanwhile is deleted, not handled
// or poisoned again.
package memo

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Size bounds the messages a listener remembers as handled but
// not deleted: about 80 bytes each plus the IDs and notes, a few
// megabytes at most. A message forgotten past it is only handled once
// more, as at-least-once allows.
const Size = 10_000

// MaxNote bounds a note (see [Memo.Remember]): a group child's result and
// a reason are kept to this length where they are recorded too.
const MaxNote = 256

// Memo remembers messages whose handler succeeded, from the moment
// it returned until their delete succeeds, so that a message that comes
// back meanwhile (its delete slow or failing, under sustained throttling
// say) is deleted without running its handler again, and a message that
// keeps failing only to be deleted is never poisoned for it. It remembers
// the same way messages copied to the poison queue and not yet deleted, so
// that they are deleted, not poisoned twice.
//
// A message is known by its ID, and checked against a hash of its text, so
// that a message ID reused with other text (a Source of one's own may) is
// not mistaken for it. It is bounded: past Size the entry
// remembered longest ago is forgotten. Entries live in one slice, linked
// in the order they were remembered, and are reused once forgotten: the
// memo allocates nothing per message once it has grown.
type Memo struct {
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
	as         As
	note       string
	prev, next int32
}

// As is what had become of a remembered message.
type As uint8

const (
	Handled  As = iota + 1 // its handler succeeded
	Poisoned               // it was copied to the poison queue
)

// New returns an empty memo.
func New() *Memo {
	return &Memo{seed: maphash.MakeSeed(), index: map[string]int32{}, oldest: -1, newest: -1, free: -1}
}

// Remember records what became of the message id with text, and note,
// what its settlement had still to record where the message's next
// delivery records it again: a group child's result, a poisoning's reason
// (cut to MaxNote bytes). Without it, a record refused on the first
// delivery would be made on the next without what only the first knew.
func (m *Memo) Remember(id, text string, as As, note string) {
	hash := maphash.String(m.seed, text)
	note = xmltext.TruncateUTF8(note, MaxNote)
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, ok := m.index[id]; ok {
		e := &m.entries[i]
		e.text, e.as, e.note = hash, as, note
		return
	}
	var i int32
	switch {
	case m.free >= 0:
		i = m.free
		m.free = m.entries[i].next
	case len(m.entries) < Size:
		m.entries = append(m.entries, memoEntry{})
		i = int32(len(m.entries) - 1)
	default:
		i = m.oldest
		m.unlink(i)
		delete(m.index, m.entries[i].id)
	}
	m.entries[i] = memoEntry{id: id, text: hash, as: as, note: note, prev: m.newest, next: -1}
	if m.newest >= 0 {
		m.entries[m.newest].next = i
	} else {
		m.oldest = i
	}
	m.newest = i
	m.index[id] = i
	m.size.Store(int64(len(m.index)))
}

// Settled reports what became of the message id with text before, and the
// note remembered with it, if it is remembered; 0 if not. While nothing is
// remembered it costs one atomic load.
func (m *Memo) Settled(id, text string) (As, string) {
	if m.size.Load() == 0 {
		return 0, ""
	}
	m.mu.Lock()
	i, ok := m.index[id]
	var e memoEntry
	if ok {
		e = m.entries[i]
	}
	m.mu.Unlock()
	if !ok || e.text != maphash.String(m.seed, text) {
		return 0, ""
	}
	return e.as, e.note
}

// Forget drops the message id once it is deleted.
func (m *Memo) Forget(id string) {
	if m.size.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.index[id]
	if !ok {
		return
	}
	m.unlink(i)
	delete(m.index, id)
	m.entries[i] = memoEntry{next: m.free}
	m.free = i
	m.size.Store(int64(len(m.index)))
}

// unlink takes entry i out of the list from oldest to newest. The caller
// holds m.mu.
func (m *Memo) unlink(i int32) {
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
