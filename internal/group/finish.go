package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Outcome is how a complete group ended.
type Outcome string

const (
	Succeeded Outcome = "succeeded" // every child succeeded
	Failed    Outcome = "failed"    // a child failed
)

// Done is a group found complete: what its continuation carries.
type Done struct {
	Group   string
	Outcome Outcome
	Size    int
	// Succeeded and Failed count the children of each outcome, as the
	// finish that completed the group found them.
	Succeeded, Failed int
	// Children are the children's finishes in index order: under
	// OnFailure, only the failure that completed it.
	Children []Child
	// Then is the continuation as created.
	Then []byte
	// Made tells this group from another of its ID, started once this
	// one's records were swept: a continuation's once-mark names both,
	// so that the new group's is not taken for a duplicate of the old
	// one's. Empty for a group whose head does not say.
	Made string
}

// Finish records what became of ref's child, and returns the group if
// this finish finds it complete (nil otherwise): the caller then sends its
// continuation, under a once-mark of the group, since more than one
// finish may find it so, and then calls Continued, after which none does. It must be called,
// and must have returned nil, before the child's message is deleted:
// a finish that fails, or a process that dies during it, is made good by
// the message's next delivery, which finishes it again.
//
// It costs one Append Block; the finish that brings a blob's count to
// its children reads that blob once, and under sharding appends to the
// head, which the last shard's finish reads.
func (s *Store) Finish(ctx context.Context, ref Ref, c Child) (*Done, error) {
	if err := ref.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	c.Index = ref.Index
	if len(c.Result) > MaxResult {
		return nil, fmt.Errorf("a child's result of %d bytes: at most %d", len(c.Result), MaxResult)
	}
	c.Reason = xmltext.TruncateUTF8(printable(c.Reason), MaxReason)
	if c.Failed {
		c.Result = nil
	} else {
		c.Reason = ""
	}
	mark, err := line(block{Child: &c})
	if err != nil {
		return nil, err
	}
	if ref.Shards == 1 {
		return s.finishInHead(ctx, ref, c, mark)
	}
	k := ref.Index % ref.Shards
	info, err := s.b.Append(ctx, s.shard(ref.Group, k), mark)
	if err != nil {
		return nil, s.appendFailed(ref, err)
	}
	if ref.Rule == OnFailure {
		if !c.Failed {
			return nil, nil
		}
		return s.failed(ctx, ref, c)
	}
	if info.Blocks < inShard(ref.Size, ref.Shards, k) {
		return nil, nil // some child of the shard has not finished: no read needed to know
	}
	marks, err := s.read(ctx, s.shard(ref.Group, k))
	if err != nil {
		return nil, err
	}
	children := tally(marks)
	if !complete(children, shardIndices(ref, k), ref.Rule) {
		return nil, nil
	}
	done, err := line(block{Shard: &shardDone{K: k, Children: sorted(children)}})
	if err != nil {
		return nil, err
	}
	if info, err = s.b.Append(ctx, s.head(ref.Group), done); err != nil {
		return nil, fmt.Errorf("group %s: shard %d: %w", ref.Group, k, err)
	}
	if info.Blocks < ref.Shards { // a lower bound: the definition may be a block too
		return nil, nil
	}
	def, heads, err := s.readHead(ctx, ref.Group)
	if err != nil || continued(heads) {
		return nil, err
	}
	all := map[int]Child{}
	seen := map[int]bool{}
	for _, b := range heads {
		if b.Shard == nil || seen[b.Shard.K] {
			continue // a shard found complete twice: its first mark holds
		}
		seen[b.Shard.K] = true
		for _, c := range b.Shard.Children {
			all[c.Index] = c
		}
	}
	if len(seen) < ref.Shards {
		return nil, nil
	}
	return done_(ref, def, sorted(all)), nil
}

// finishInHead is Finish for a group whose head takes its children's
// marks.
func (s *Store) finishInHead(ctx context.Context, ref Ref, c Child, mark []byte) (*Done, error) {
	info, err := s.b.Append(ctx, s.head(ref.Group), mark)
	if err != nil {
		return nil, s.appendFailed(ref, err)
	}
	switch {
	case ref.Rule == OnFailure && !c.Failed:
		return nil, nil
	case ref.Rule == OnFailure:
		return s.failed(ctx, ref, c)
	case info.Blocks < ref.Size: // a mark per child; a lower bound, as the definition may be a block too
		return nil, nil
	}
	def, marks, err := s.readHead(ctx, ref.Group)
	if err != nil || continued(marks) {
		return nil, err
	}
	children := tally(marks)
	if !complete(children, shardIndices(ref, 0), ref.Rule) {
		return nil, nil
	}
	return done_(ref, def, sorted(children)), nil
}

// Continued marks group id's continuation sent: a finish that finds the
// group complete after this (a child's message delivered again) reports
// nothing. One Append Block. Under OnFailure, where each failure reports
// the group, it stops the failures after it too.
func (s *Store) Continued(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	mark, err := line(block{Continued: true})
	if err != nil {
		return err
	}
	if _, err := s.b.Append(ctx, s.head(id), mark); err != nil {
		if errors.Is(err, blobs.ErrNotFound) {
			return fmt.Errorf("group %s: %w (%w)", id, ErrNotFound, err)
		}
		return fmt.Errorf("group %s: %w", id, err)
	}
	return nil
}

// appendFailed is the error of a child's mark that was not appended: a
// group that is gone (swept, or never made) matches ErrNotFound.
func (s *Store) appendFailed(ref Ref, err error) error {
	if errors.Is(err, blobs.ErrNotFound) {
		return fmt.Errorf("group %s: child %d: %w (%w)", ref.Group, ref.Index, ErrNotFound, err)
	}
	return fmt.Errorf("group %s: child %d: %w", ref.Group, ref.Index, err)
}

// failed is the Done of an OnFailure group that c's failure completes.
func (s *Store) failed(ctx context.Context, ref Ref, c Child) (*Done, error) {
	def, heads, err := s.readHead(ctx, ref.Group)
	if err != nil || continued(heads) {
		return nil, err
	}
	return &Done{Group: ref.Group, Outcome: Failed, Size: ref.Size, Failed: 1, Children: []Child{c}, Then: def.Then, Made: def.Made}, nil
}

// Delete removes group id's blobs: its shards, then its head, so that a
// delete cut short leaves a head that a later one finds. A group already
// gone is no error. Its children's finishes after this fail with
// ErrNotFound.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	def, _, err := s.readHead(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case errors.Is(err, errNoDefinition):
		def.Shards = 1
	case err != nil:
		return err
	case def.check() != nil:
		return fmt.Errorf("%w: group %s: %w", ErrCorrupt, id, def.check())
	}
	for k := range def.Shards {
		if def.Shards == 1 {
			break // the head holds the marks
		}
		if _, err := s.b.Delete(ctx, s.shard(id, k), ""); err != nil && !errors.Is(err, blobs.ErrNotFound) {
			return fmt.Errorf("group %s: shard %d: %w", id, k, err)
		}
	}
	if _, err := s.b.Delete(ctx, s.head(id), ""); err != nil && !errors.Is(err, blobs.ErrNotFound) {
		return fmt.Errorf("group %s: %w", id, err)
	}
	return nil
}

// done_ is the Done of a group whose children are all finished.
func done_(ref Ref, def definition, children []Child) *Done {
	d := &Done{Group: ref.Group, Outcome: Succeeded, Size: ref.Size, Children: children, Then: def.Then, Made: def.Made}
	for _, c := range children {
		if c.Failed {
			d.Failed++
		} else {
			d.Succeeded++
		}
	}
	if d.Failed > 0 {
		d.Outcome = Failed
	}
	return d
}

// shardIndices are the children of ref's group in shard k.
func shardIndices(ref Ref, k int) []int {
	out := make([]int, 0, inShard(ref.Size, ref.Shards, k))
	for i := k; i < ref.Size; i += ref.Shards {
		out = append(out, i)
	}
	return out
}

// printable is s with each control character a space and each invalid
// byte the replacement character, which its block holds without growing
// it more than twice.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
