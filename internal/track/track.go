// Package track keeps what became of a tracked message: one record each,
// written when it is sent, moved by the listeners that handle it and by a
// cancel, and never moved out of a final state (succeeded, poisoned,
// cancelled), whoever writes last: a late or repeated write of an earlier
// state, from a slow process or a redelivery, changes nothing.
//
// A move is a read and a conditional write (If-Match the version read);
// one that loses a race reads again, so that concurrent moves (a listener
// and a cancel, two listeners after a redelivery) each see the other's.
package track

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// State is where a tracked message is.
type State string

const (
	Pending   State = "pending"   // sent, not delivered yet
	Delivered State = "delivered" // a handler has it
	Failed    State = "failed"    // its last try failed; it is tried again
	Succeeded State = "succeeded" // handled, and deleted
	Poisoned  State = "poisoned"  // moved to the poison queue
	Cancelled State = "cancelled" // cancelled before it was handled
)

// Final reports whether s is an end: no move leaves it.
func (s State) Final() bool { return s == Succeeded || s == Poisoned || s == Cancelled }

func (s State) valid() bool {
	switch s {
	case Pending, Delivered, Failed, Succeeded, Poisoned, Cancelled:
		return true
	}
	return false
}

// Status is a tracked message's record.
type Status struct {
	State State  `json:"s"`
	Queue string `json:"q,omitempty"`
	// Message is the message's ID, once delivered (a delayed message's
	// changes as it waits).
	Message string `json:"m,omitempty"`
	// Tries counts its deliveries so far, as the service counted them.
	Tries int `json:"t,omitempty"`
	// Reason is why its last try failed, or why it was poisoned.
	Reason string `json:"r,omitempty"`
	// Updated is its last move, by the store's clock; not stored (the
	// record's own time says it).
	Updated time.Time `json:"-"`
}

// MaxReason is the longest reason a record keeps; a longer one is cut.
const MaxReason = 256

// TokenLen is a token's length: 32 lowercase hex digits.
const TokenLen = 32

// ErrNotFound is matched by the error of a read of a token with no record
// (never tracked, or swept).
var ErrNotFound = errors.New("tracked message not found")

// ErrCorrupt is matched by the error of a read of a record this package
// did not write.
var ErrCorrupt = errors.New("tracking record unreadable")

// NewToken returns a fresh token.
func NewToken() string {
	b := make([]byte, TokenLen/2)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// ValidToken reports whether s is a token: it can name no other blob.
func ValidToken(s string) bool { return payload.IsLowerHex(s, TokenLen) }

// Store keeps tracked messages' records in a record store.
type Store struct {
	r    records.Store
	life time.Duration
}

// New returns the store of records kept in r, each for life after its
// last write.
func New(r records.Store, life time.Duration) *Store { return &Store{r: r, life: life} }

// name is token's record's name.
func name(token string) string { return "status/" + token }

// IsName reports whether s is the name of a tracked message's record. A
// sweep removes only such names, so that a blob of another writer is
// never taken for one.
func IsName(s string) bool {
	token, ok := strings.CutPrefix(s, "status/")
	return ok && ValidToken(token)
}

// Start writes token's first record, Pending in queue: one request. A
// record already there (a send tried again) is left as it is.
func (s *Store) Start(ctx context.Context, token, queue string) error {
	if !ValidToken(token) {
		return fmt.Errorf("%w: token %.40q", ErrCorrupt, token)
	}
	value, err := json.Marshal(Status{State: Pending, Queue: queue})
	if err != nil {
		return err
	}
	err = s.r.Write(ctx, name(token), &records.Record{Kind: payload.KindStatus, Value: value, Life: s.life})
	if errors.Is(err, records.ErrChanged) {
		return nil
	}
	return err
}

// maxRaces bounds the reads again after a lost race.
const maxRaces = 8

// Move moves token's record to to: two requests (a read, a conditional
// write), none if it is in a final state already, or to is Pending. A
// record missing (its start's writer died before sending, or it was
// swept) is written anew. Tries and the message's ID only grow.
func (s *Store) Move(ctx context.Context, token string, to Status) error {
	if !ValidToken(token) {
		return fmt.Errorf("%w: token %.40q", ErrCorrupt, token)
	}
	if !to.State.valid() {
		return fmt.Errorf("track: no state %q", to.State)
	}
	to.Reason = xmltext.TruncateUTF8(to.Reason, MaxReason)
	for range maxRaces {
		rec, cur, err := s.read(ctx, token)
		switch {
		case errors.Is(err, ErrNotFound):
			rec = &records.Record{Kind: payload.KindStatus}
		case err != nil:
			return err
		case cur.State.Final() || to.State == Pending:
			return nil
		}
		next := to
		if next.Queue == "" {
			next.Queue = cur.Queue
		}
		if next.Message == "" {
			next.Message = cur.Message
		}
		next.Tries = max(next.Tries, cur.Tries)
		if next.State == Poisoned && next.Reason == "" {
			next.Reason = cur.Reason // recorded again on a later delivery, which no longer knows why
		}
		if rec.Value, err = json.Marshal(next); err != nil {
			return err
		}
		rec.Life = s.life
		err = s.r.Write(ctx, name(token), rec)
		if !errors.Is(err, records.ErrChanged) {
			return err
		}
	}
	return fmt.Errorf("track: %s: changed %d times while moved to %s", token, maxRaces, to.State)
}

// Read returns token's status: one request.
func (s *Store) Read(ctx context.Context, token string) (Status, error) {
	if !ValidToken(token) {
		return Status{}, fmt.Errorf("%w: %.40q is not a token", ErrNotFound, token)
	}
	_, st, err := s.read(ctx, token)
	return st, err
}

func (s *Store) read(ctx context.Context, token string) (*records.Record, Status, error) {
	rec, err := s.r.Read(ctx, name(token))
	switch {
	case errors.Is(err, records.ErrMissing):
		return nil, Status{}, fmt.Errorf("%w: %s", ErrNotFound, token)
	case err != nil:
		return nil, Status{}, err
	}
	var st Status
	if rec.Kind != payload.KindStatus || json.Unmarshal(rec.Value, &st) != nil || !st.State.valid() {
		return nil, Status{}, fmt.Errorf("%w: %s", ErrCorrupt, token)
	}
	st.Updated = rec.Written
	return rec, st, nil
}
