package group

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// maxFailures bounds the failed children a Status lists.
const maxFailures = 100

// Status is a group's progress.
type Status struct {
	Group  string
	Size   int
	Rule   Rule
	Shards int
	// Succeeded, Failed and Pending count the children by their best
	// finish so far (a success over a failure); Pending have none yet.
	Succeeded, Failed, Pending int
	// Failures are the first failed children, in index order, with
	// their reasons: at most 100.
	Failures []Child
	// Complete says the group is complete by its rule; Outcome is then
	// how it ended.
	Complete bool
	Outcome  Outcome
}

// Status reads a group's progress: one read of its head, and one of each
// shard, a few at a time.
func (s *Store) Status(ctx context.Context, id string) (Status, error) {
	if err := checkID(id); err != nil {
		return Status{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	def, heads, err := s.readHead(ctx, id)
	if err != nil {
		return Status{}, err
	}
	if err := def.check(); err != nil {
		return Status{}, fmt.Errorf("%w: group %s: %w", ErrCorrupt, id, err)
	}
	st := Status{Group: id, Size: def.Size, Rule: Rule(def.Rule[0]), Shards: def.Shards}
	children := tally(heads)
	if def.Shards > 1 {
		shards := make([]map[int]Child, def.Shards)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for k := range def.Shards {
			g.Go(func() error {
				marks, err := s.read(gctx, s.shard(id, k))
				shards[k] = tally(marks)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return Status{}, err
		}
		for _, m := range shards {
			for i, c := range m {
				children[i] = c
			}
		}
	}
	for _, c := range sorted(children) {
		if c.Index < 0 || c.Index >= def.Size {
			continue
		}
		if c.Failed {
			st.Failed++
			if len(st.Failures) < maxFailures {
				st.Failures = append(st.Failures, c)
			}
		} else {
			st.Succeeded++
		}
	}
	st.Pending = def.Size - st.Succeeded - st.Failed
	switch {
	case st.Rule == OnFailure && st.Failed > 0:
		st.Complete, st.Outcome = true, Failed
	case st.Rule == OnFinish && st.Pending == 0:
		st.Complete, st.Outcome = true, Succeeded
		if st.Failed > 0 {
			st.Outcome = Failed
		}
	case st.Rule == OnSuccess && st.Succeeded == def.Size:
		st.Complete, st.Outcome = true, Succeeded
	}
	return st, nil
}

// Results reads what the children that succeeded left (see
// [Child.Result]), by index, as the group was when each of its blobs was
// complete: one read of its head, and one of each shard the head does not
// mark complete yet (none, once the group is). Children that left nothing
// are not listed.
func (s *Store) Results(ctx context.Context, id string) (map[int][]byte, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	def, heads, err := s.readHead(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := def.check(); err != nil {
		return nil, fmt.Errorf("%w: group %s: %w", ErrCorrupt, id, err)
	}
	children := tally(heads)
	marked := map[int]bool{}
	for _, b := range heads {
		if b.Shard == nil || marked[b.Shard.K] {
			continue
		}
		marked[b.Shard.K] = true
		for _, c := range b.Shard.Children {
			children[c.Index] = c
		}
	}
	for k := 0; def.Shards > 1 && k < def.Shards; k++ {
		if marked[k] {
			continue
		}
		marks, err := s.read(ctx, s.shard(id, k))
		if err != nil {
			return nil, err
		}
		for i, c := range tally(marks) {
			children[i] = c
		}
	}
	out := map[int][]byte{}
	for i, c := range children {
		if !c.Failed && len(c.Result) > 0 && i >= 0 && i < def.Size {
			out[i] = c.Result
		}
	}
	return out, nil
}
