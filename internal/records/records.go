// Package records is where a scheduler keeps its schedules' state, a
// listener marks the scheduled messages it delivered, and a publisher keeps
// the records of its cancels and unique keys: small named records, each
// written only if it is as the writer last read it (an ETag), with the
// store's clock beside them, so that every decision is taken on one clock
// whatever the machines' own say. One store keeps them all ([Blobs]), on
// either blob backend: the service's, or memory's.
package records

import (
	"context"
	"errors"
	"time"
)

// ErrChanged is matched by the error of a write whose condition failed: a
// record was created, replaced or removed by someone else since it was
// read (or, for a create, one exists).
var ErrChanged = errors.New("record changed since it was read")

// ErrMissing is matched by the error of a read of a record that does not
// exist.
var ErrMissing = errors.New("record missing")

// Record is one record as read or to write.
type Record struct {
	// Kind says what the record is (a payload.Kind…); a sweep judges it by
	// its kind and Life.
	Kind string
	// Value is its content: at most MaxValue bytes.
	Value []byte
	// Life is how long it is kept from its write; zero: for ever.
	Life time.Duration

	// Version is the record's ETag as read or written; empty for one not
	// yet written.
	Version string
	// Written is its last write, by the store's clock.
	Written time.Time
	// Now is the store's time at the read or write that returned it.
	Now time.Time
}

// MaxValue bounds a record's value: what a reader reads of one.
const MaxValue = 16 << 10

// Store keeps records.
type Store interface {
	// Read returns the record of that name, or an error matching
	// ErrMissing.
	Read(ctx context.Context, name string) (*Record, error)
	// Write writes r under name if the record there is still r.Version
	// (none, if r.Version is empty), and updates r.Version, r.Written and
	// r.Now. A failed condition is an error matching ErrChanged.
	Write(ctx context.Context, name string, r *Record) error
	// Now is the store's time, as best known: the local time corrected by
	// the store's last answer.
	Now() time.Time
	// Known reports whether an answer of the store has told its time:
	// until then Now is the local time, and a decision that needs the
	// store's must not be taken on it.
	Known() bool
	// Sleep waits until the store's clock reads until, wake is closed, or
	// ctx ends; it reports whether ctx is still live.
	Sleep(ctx context.Context, until time.Time, wake <-chan struct{}) bool
}
