// Package keyorder keeps the messages of a key in the order one publisher
// sent them. A publisher stamps each keyed message with a [Stamp]: its own
// random ID, the message's number (one counter for all its keys, so that
// numbers only grow), and the number of the key's last message whose send
// had succeeded when this one began, the one it must follow. A listener
// lets a message run once its key's [State] says that predecessor is done;
// the state lives in the metadata of the key's lease blob, written by the
// holder of the lease only.
//
// A predecessor that never comes (its message expired, was cancelled or
// purged, or was poisoned before it could be tried) would hold its key
// forever: a gap that stands for the listener's wait is given up, and
// the message goes on without it.
package keyorder

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Stamp is a message's place in its key's order.
type Stamp struct {
	// Pub is the publisher's ID: 16 lower-case hex digits.
	Pub string
	// N is the message's number, from 1, unique in its publisher.
	N uint64
	// Prev is the number of the message it follows; 0 for none.
	Prev uint64
}

// String is the stamp as a message carries it: "pub.n.prev".
func (s Stamp) String() string {
	return s.Pub + "." + strconv.FormatUint(s.N, 10) + "." + strconv.FormatUint(s.Prev, 10)
}

// ParseStamp reads a stamp written by String. Anything else, from a
// hostile or broken sender, is not a stamp (false): such a message waits
// for nothing.
func ParseStamp(v string) (Stamp, bool) {
	if len(v) > 64 {
		return Stamp{}, false
	}
	pub, rest, ok := strings.Cut(v, ".")
	if !ok || !validPub(pub) {
		return Stamp{}, false
	}
	ns, ps, ok := strings.Cut(rest, ".")
	if !ok {
		return Stamp{}, false
	}
	n, err1 := strconv.ParseUint(ns, 10, 64)
	p, err2 := strconv.ParseUint(ps, 10, 64)
	if err1 != nil || err2 != nil || n == 0 || p >= n {
		return Stamp{}, false
	}
	return Stamp{Pub: pub, N: n, Prev: p}, true
}

// validPub says whether s is a publisher ID: 16 lower-case hex digits.
func validPub(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Sequencer stamps one publisher's keyed messages. It remembers the last
// successful send of up to about remembered keys; a key it has forgotten
// (idle while that many others were sent) starts afresh, its next message
// following none.
type Sequencer struct {
	pub string
	n   atomic.Uint64

	mu       sync.Mutex
	cur, old map[string]uint64 // two generations: a key is in one or the other
}

// remembered is about how many keys a Sequencer remembers.
const remembered = 1 << 16

// NewSequencer returns a sequencer with a new random publisher ID.
func NewSequencer() *Sequencer {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Sequencer{pub: hex.EncodeToString(b[:]), cur: map[string]uint64{}}
}

// Next stamps the next message of key.
func (q *Sequencer) Next(key string) Stamp {
	q.mu.Lock()
	prev, ok := q.cur[key]
	if !ok {
		prev = q.old[key]
	}
	q.mu.Unlock()
	return Stamp{Pub: q.pub, N: q.n.Add(1), Prev: prev}
}

// Sent records that s, a stamp of key, was sent: the key's later messages
// follow it (or a later one already sent).
func (q *Sequencer) Sent(key string, s Stamp) {
	q.mu.Lock()
	defer q.mu.Unlock()
	last, ok := q.cur[key]
	if !ok {
		last = q.old[key]
	}
	if s.N <= last {
		return
	}
	if len(q.cur) >= remembered/2 {
		q.old, q.cur = q.cur, make(map[string]uint64, len(q.cur))
	}
	q.cur[key] = s.N
}
