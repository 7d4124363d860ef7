package payload

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Meta is what a payload blob says about itself in its metadata, so that a
// sweep can tell waste from payloads still referenced without reading them.
type Meta struct {
	Kind     string    // KindBatch, KindSingle, or a record's (see IsRecord)
	Queue    string    // the queue the pointer was sent to
	Created  time.Time // when the blob was written
	Expires  time.Time // when the pointer message expires; zero: never
	Items    int       // items in the payload
	Done     string    // checkpoint: encoded ranges of items completed (see DoneSet)
	Poisoned time.Time // when a poison envelope took the pointer; zero: never
	State    string    // a cancel record's: StateCancelled, StateDelivered or StatePending
	// Writer is a token the blob's last writer chose for that write (see
	// NewWriterToken): a conditional write whose answer was lost, and which the
	// SDK retried, finds its own token and knows the write was done.
	Writer string
}

// NewWriterToken returns a fresh token for one write (see Meta.Writer).
func NewWriterToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// Kinds of record: small blobs beside the payloads that say something of
// a message, and expire with it.
const (
	// KindCancel records the fate of a message sent to be handled later:
	// cancelled, or delivered to a listener (too late to cancel).
	KindCancel = "cancel"
	// KindUnique holds a unique send's key for its window.
	KindUnique = "unique"
	// KindSchedule holds a schedule's state: its next and last
	// occurrence, and who claims it.
	KindSchedule = "schedule"
	// KindOnce marks an occurrence's message delivered, so that a
	// duplicate of it is not.
	KindOnce = "once"
	// KindGroup is a group's head or shard: the marks of its children's
	// finishes (see internal/group). It lives on after its last write.
	KindGroup = "group"
	// KindStatus is a tracked message's status (see internal/track). It
	// lives on after its last write.
	KindStatus = "status"
)

// States of a cancel record.
const (
	StateCancelled = "cancelled"
	StateDelivered = "delivered"
	// StatePending is a cancel's of a message without a due line, until
	// its delete says which of the other two the message's fate is.
	StatePending = "pending"
	// StateUndetermined is a cancel's of a message that may have been
	// delivered so long ago that no record of it is left: a delivery still
	// to come is dropped, as for StateCancelled, but a cancel cannot say
	// whether one came before.
	StateUndetermined = "undetermined"
)

// IsRecord reports whether kind is a record's.
func IsRecord(kind string) bool {
	return kind == KindCancel || kind == KindUnique || kind == KindSchedule || kind == KindOnce || kind == KindGroup || kind == KindStatus
}

// Metadata names. They are short: all of a blob's metadata must fit in 8 KiB.
const (
	metaKind     = "kind"
	metaQueue    = "queue"
	metaCreated  = "created"
	metaExpires  = "expires"
	metaItems    = "items"
	metaDone     = "done"
	metaPoisoned = "poisoned"
	metaState    = "state"
	metaWriter   = "writer"
	metaNever    = "never"
)

// ToMap returns m as blob metadata: times in RFC 3339 (UTC, to the second),
// "never" for a zero Expires, and no entry for an empty Done or a zero
// Poisoned.
func (m *Meta) ToMap() map[string]*string {
	put := func(mp map[string]*string, k, v string) { mp[k] = &v }
	mp := map[string]*string{}
	put(mp, metaKind, m.Kind)
	put(mp, metaQueue, m.Queue)
	put(mp, metaCreated, m.Created.UTC().Format(time.RFC3339))
	if m.Expires.IsZero() {
		put(mp, metaExpires, metaNever)
	} else {
		put(mp, metaExpires, m.Expires.UTC().Format(time.RFC3339))
	}
	put(mp, metaItems, strconv.Itoa(m.Items))
	if m.Done != "" {
		put(mp, metaDone, m.Done)
	}
	if !m.Poisoned.IsZero() {
		put(mp, metaPoisoned, m.Poisoned.UTC().Format(time.RFC3339))
	}
	if m.State != "" {
		put(mp, metaState, m.State)
	}
	if m.Writer != "" {
		put(mp, metaWriter, m.Writer)
	}
	return mp
}

// ParseMeta reads metadata written by ToMap. It reports false for a blob
// this package did not write (or whose metadata was altered): such blobs
// are never swept. The service returns names in any case, so names match
// case-insensitively.
func ParseMeta(mp map[string]*string) (Meta, bool) {
	get := func(k string) (string, bool) {
		for name, v := range mp {
			if strings.EqualFold(name, k) && v != nil {
				return *v, true
			}
		}
		return "", false
	}
	var m Meta
	var ok bool
	var err error
	if m.Kind, ok = get(metaKind); !ok || (m.Kind != KindBatch && m.Kind != KindSingle && !IsRecord(m.Kind)) {
		return m, false
	}
	m.Queue, _ = get(metaQueue)
	created, _ := get(metaCreated)
	if m.Created, err = time.Parse(time.RFC3339, created); err != nil {
		return m, false
	}
	switch exp, _ := get(metaExpires); exp {
	case metaNever:
	default:
		if m.Expires, err = time.Parse(time.RFC3339, exp); err != nil {
			return m, false
		}
	}
	items, _ := get(metaItems)
	if m.Items, err = strconv.Atoi(items); err != nil {
		return m, false
	}
	m.Done, _ = get(metaDone)
	m.State, _ = get(metaState)
	m.Writer, _ = get(metaWriter)
	if p, ok := get(metaPoisoned); ok {
		// A marker that does not parse still marks: keeping is the safe side.
		// So does one that reads as the zero time, which would mean none.
		if m.Poisoned, err = time.Parse(time.RFC3339, p); err != nil || m.Poisoned.IsZero() {
			m.Poisoned = m.Created
		}
		if m.Poisoned.IsZero() {
			m.Poisoned = time.Unix(0, 0).UTC()
		}
	}
	return m, true
}

// Strings is [Meta.ToMap] as plain strings, as a blob backend takes
// metadata.
func (m *Meta) Strings() map[string]string {
	out := map[string]string{}
	for k, v := range m.ToMap() {
		out[k] = *v
	}
	return out
}

// ParseStrings is [ParseMeta] of metadata as plain strings.
func ParseStrings(mp map[string]string) (Meta, bool) {
	ptrs := make(map[string]*string, len(mp))
	for k, v := range mp {
		ptrs[k] = &v
	}
	return ParseMeta(ptrs)
}
