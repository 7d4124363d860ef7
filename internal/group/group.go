// Package group keeps a group of messages, its children, on the blob
// layer, and tells the one finish that completes the group, so that its
// continuation is sent once every child is done.
//
// A group is a tree of append blobs whose blocks are marks. Its head holds
// the group's definition (in its metadata and first block); with a few
// children, it also takes their marks; with many, they are spread over
// shards of up to 64 (child i in shard i mod S), and the head takes one mark per
// shard once the shard is complete. A finish costs one Append Block,
// whose answer says how many blocks the blob holds: a count short of the
// blob's children proves it incomplete without a read, and the append that
// brings the count to it reads the blob once and checks, by index, that
// every child is there (duplicates, from a message delivered twice or an
// append tried again after its answer was lost, count once). The last
// append to a blob always sees a count that calls for the read, so some
// finish always finds the group complete; every finish that finds it so
// reports it, and the caller sends the continuation under a once-mark, so
// that one is handled.
//
// Marks are idempotent by index: a child's finish may be recorded any
// number of times, by any number of processes, and a process that dies
// between the steps of a finish leaves a state that the next finish of any
// child, or the same child's redelivery, carries on from. A child whose
// message is not deleted until [Store.Finish] returns is therefore never
// lost to the group.
package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/payload"
)

// Rule says when a group is complete.
type Rule byte

const (
	// OnSuccess: every child has succeeded. A child that failed keeps the
	// group waiting; one requeued that then succeeds completes it.
	OnSuccess Rule = 's'
	// OnFinish: every child has succeeded or failed.
	OnFinish Rule = 'f'
	// OnFailure: a child has failed. A group whose children all succeed
	// is never complete by this rule (its status says it succeeded).
	OnFailure Rule = 'x'
)

func (r Rule) valid() bool { return r == OnSuccess || r == OnFinish || r == OnFailure }

// String is the rule's name.
func (r Rule) String() string {
	switch r {
	case OnSuccess:
		return "success"
	case OnFinish:
		return "finish"
	case OnFailure:
		return "failure"
	}
	return fmt.Sprintf("rule(%q)", byte(r))
}

// Bounds.
const (
	// MaxChildren is the most children a group has: with the bounds
	// below, the marks of a full group's finishes, which the finish that
	// completes it reads, stay under maxBlob.
	MaxChildren = 100_000
	// MaxResult is the longest result a child's success carries.
	MaxResult = 256
	// MaxReason is the longest failure reason a finish keeps; a longer
	// one is cut. A failure carries no result.
	MaxReason = 256
	// MaxThen is the longest continuation a group keeps.
	MaxThen = 4 << 20
	// shardChildren is how many children a shard holds at most, and how
	// many a head holds before the group is sharded: few enough that the
	// read that checks a blob stays small (about 25 KiB of marks), and
	// that the appends of a busy group spread over many blobs (the
	// service serves a few hundred requests a second per blob; against
	// Azurite, a group of 600 children handled at full speed completed
	// 2.2 s after its last handler returned with 256 per shard, 1.9 s with
	// 64, 1.3 s with 32, as its appends queued behind one another), at
	// three requests per shard.
	shardChildren = 64
	// idLen bounds a group's ID.
	idLen = 128
)

// ErrNotFound is matched by the error of a read of a group that does not
// exist (never created, or swept).
var ErrNotFound = errors.New("group not found")

// ErrExists is matched by the error of a create of a group that exists
// with another definition.
var ErrExists = errors.New("group exists with another definition")

// ErrCorrupt is matched by the error of a read of a group whose blobs are
// not what this package writes.
var ErrCorrupt = errors.New("group records unreadable")

// Spec defines a group.
type Spec struct {
	// ID names the group: 1 to 128 letters, digits, '-', '_' and '.'.
	ID string
	// Size is how many children it has, indexed 0 to Size-1.
	Size int
	// Rule says when it is complete.
	Rule Rule
	// Then is the continuation, kept as it is and handed back when the
	// group completes.
	Then []byte
	// Queue names where the continuation goes, for operators and sweeps.
	Queue string
	// Life is how long the group's records stay after their last write;
	// the sweep removes them then.
	Life time.Duration
}

// Ref is what a child's message carries of its group: enough to record
// its finish without reading the group first.
type Ref struct {
	Group  string
	Index  int
	Size   int
	Shards int // 1: the head takes the children's marks
	Rule   Rule
}

// Refs returns the Ref of each child of spec's group: child i's is
// refs(i).
func (s Spec) Refs() func(i int) Ref {
	shards := shardsFor(s.Size)
	return func(i int) Ref { return Ref{Group: s.ID, Index: i, Size: s.Size, Shards: shards, Rule: s.Rule} }
}

// String renders r as a message's metadata carries it.
func (r Ref) String() string {
	return fmt.Sprintf("1/%c/%d/%d/%d/%s", r.Rule, r.Size, r.Shards, r.Index, r.Group)
}

// ParseRef reads what Ref.String wrote.
func ParseRef(text string) (Ref, error) {
	parts := strings.SplitN(text, "/", 6)
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%w: group reference %.80q: %s", ErrCorrupt, text, why)
	}
	if len(parts) != 6 || parts[0] != "1" || len(parts[1]) != 1 {
		return bad("not of this version")
	}
	var r Ref
	var err error
	r.Rule = Rule(parts[1][0])
	if r.Size, err = strconv.Atoi(parts[2]); err != nil {
		return bad("size")
	}
	if r.Shards, err = strconv.Atoi(parts[3]); err != nil {
		return bad("shards")
	}
	if r.Index, err = strconv.Atoi(parts[4]); err != nil {
		return bad("index")
	}
	r.Group = parts[5]
	if err := r.check(); err != nil {
		return bad(err.Error())
	}
	return r, nil
}

// check refuses a reference no Spec gives.
func (r Ref) check() error {
	switch {
	case checkID(r.Group) != nil:
		return checkID(r.Group)
	case !r.Rule.valid():
		return fmt.Errorf("unknown rule %q", byte(r.Rule))
	case r.Size < 1 || r.Size > MaxChildren:
		return fmt.Errorf("size %d", r.Size)
	case r.Shards != shardsFor(r.Size):
		return fmt.Errorf("%d shards for %d children", r.Shards, r.Size)
	case r.Index < 0 || r.Index >= r.Size:
		return fmt.Errorf("index %d of %d", r.Index, r.Size)
	}
	return nil
}

// shardsFor is how many shards a group of size children has: 1 when the
// head takes them all.
func shardsFor(size int) int {
	if size <= shardChildren {
		return 1
	}
	return (size + shardChildren - 1) / shardChildren
}

// inShard is how many of size children, spread over shards, fall in shard
// k (child i in shard i mod shards).
func inShard(size, shards, k int) int {
	n := size / shards
	if k < size%shards {
		n++
	}
	return n
}

func checkID(id string) error {
	if id == "" || len(id) > idLen {
		return fmt.Errorf("a group ID has 1 to %d characters, not %d", idLen, len(id))
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("group ID %q: only letters, digits, '-', '_' and '.'", id)
		}
	}
	if strings.Trim(id, ".") == "" {
		return fmt.Errorf("group ID %q: not dots alone (a path would read them as a folder)", id)
	}
	return nil
}

// Check refuses a spec that cannot be kept.
func (s Spec) Check() error {
	switch {
	case checkID(s.ID) != nil:
		return checkID(s.ID)
	case s.Size < 1 || s.Size > MaxChildren:
		return fmt.Errorf("a group has 1 to %d children, not %d", MaxChildren, s.Size)
	case !s.Rule.valid():
		return fmt.Errorf("unknown rule %q", byte(s.Rule))
	case len(s.Then) > MaxThen:
		return fmt.Errorf("a continuation of %d bytes: at most %d", len(s.Then), MaxThen)
	case s.Life <= 0:
		return fmt.Errorf("a group's life of %v: it must be positive", s.Life)
	}
	return nil
}

// Store keeps groups in a blob container, under a prefix.
type Store struct {
	b      blobs.Backend
	prefix string
	now    func() time.Time
}

// New returns the groups kept in b under prefix (for instance "groups/").
// now stamps the records' creation for the sweep, which judges their life
// from their last write on the service's clock.
func New(b blobs.Backend, prefix string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{b: b, prefix: prefix, now: now}
}

func (s *Store) head(id string) string         { return s.prefix + id }
func (s *Store) shard(id string, k int) string { return s.prefix + id + "/" + strconv.Itoa(k) }

// Owns reports whether name is one this store gives a group's blob: a
// head, or a shard within the most a group has. A sweep removes only
// such names, so that a blob of another writer is never taken for one.
func (s *Store) Owns(name string) bool {
	rest, ok := strings.CutPrefix(name, s.prefix)
	if !ok {
		return false
	}
	id, shard, sharded := strings.Cut(rest, "/")
	if checkID(id) != nil {
		return false
	}
	if !sharded {
		return true
	}
	k, err := strconv.Atoi(shard)
	return err == nil && k >= 0 && k < shardsFor(MaxChildren) && strconv.Itoa(k) == shard
}

// meta is the metadata of each of spec's blobs: a record the sweep
// removes once life has passed since its last write.
func (s *Store) meta(spec Spec) map[string]string {
	now := s.now()
	m := payload.Meta{Kind: payload.KindGroup, Queue: spec.Queue, Created: now, Expires: now.Add(spec.Life), Items: spec.Size}
	return m.Strings()
}

// Create writes spec's group: its head, which holds the definition (in its
// metadata, or in its first block if too long for it), and its shards, if
// it has any: one request for a group of up to 64 children and a
// continuation of a few KiB. A group created again with
// the same definition (a creator that runs again after a crash) is not an
// error, and its missing parts are made; one with another definition is
// ErrExists.
func (s *Store) Create(ctx context.Context, spec Spec) error {
	if err := spec.Check(); err != nil {
		return err
	}
	meta := s.meta(spec)
	def := definition{Size: spec.Size, Rule: string(spec.Rule), Shards: shardsFor(spec.Size), Then: spec.Then, Made: newMade()}
	block, err := def.encode()
	if err != nil {
		return err
	}
	inline, small := def.inline()
	if small {
		meta[metaDefinition] = inline
	}
	_, err = s.b.CreateAppend(ctx, s.head(spec.ID), meta)
	delete(meta, metaDefinition) // the shards' metadata is the record's alone
	switch {
	case errors.Is(err, blobs.ErrConflict):
		// Made before: by this creator, whose answer was lost, or by a
		// run of it that died before it finished.
		existing, _, rerr := s.readHead(ctx, spec.ID)
		switch {
		case errors.Is(rerr, errNoDefinition):
			if _, err := s.b.Append(ctx, s.head(spec.ID), block); err != nil {
				return fmt.Errorf("group %s: %w", spec.ID, err)
			}
			// Another creator may have written its definition first: the
			// first block is the group's.
			if existing, _, rerr = s.readHead(ctx, spec.ID); rerr != nil {
				return rerr
			}
			if !existing.same(def) {
				return fmt.Errorf("%w: %s", ErrExists, spec.ID)
			}
		case rerr != nil:
			return rerr
		case !existing.same(def):
			return fmt.Errorf("%w: %s", ErrExists, spec.ID)
		}
	case err != nil:
		return fmt.Errorf("group %s: %w", spec.ID, err)
	case !small:
		if _, err := s.b.Append(ctx, s.head(spec.ID), block); err != nil {
			return fmt.Errorf("group %s: %w", spec.ID, err)
		}
	}
	return s.createShards(ctx, spec.ID, def.Shards, meta)
}

// newMade draws a definition's Made: 64 random bits, in hex.
func newMade() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createShards makes a group's shards, a few at a time; one made before
// is fine.
func (s *Store) createShards(ctx context.Context, id string, shards int, meta map[string]string) error {
	if shards == 1 {
		return nil
	}
	const atOnce = 16
	errs := make(chan error, shards)
	sem := make(chan struct{}, atOnce)
	for k := range shards {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := s.b.CreateAppend(ctx, s.shard(id, k), meta)
			if errors.Is(err, blobs.ErrConflict) {
				err = nil
			}
			errs <- err
		}()
	}
	for range atOnce {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("group %s: creating its shards: %w", id, err)
		}
	}
	return nil
}
