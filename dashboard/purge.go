package dashboard

import (
	"context"
	"errors"
	"time"

	"github.com/azdispatch/azdispatch"
)

// purgeVisibility hides the envelopes a purge has received while it goes
// on, as azdispatch.Requeue does; those it keeps are made visible again
// when it ends.
const purgeVisibility = 30 * time.Second

// purge deletes from poison the envelopes match picks, at most max (0: all),
// calling each for every one deleted. Like azdispatch.Requeue it remembers
// the IDs it has seen and stops at the first batch with nothing new; every
// message it received and did not delete (not picked, not an envelope, or
// not reached because a delete failed or the context ended) is made visible
// again at its end, however it ends, so their dequeue counts grow by one. The library has no purge of its own:
// this is the operator CLI's, over the exported Source.
func purge(ctx context.Context, poison azdispatch.Source, match func(*azdispatch.PoisonEnvelope) bool, max int, each func()) (deleted int, err error) {
	seen := make(map[string]bool)
	kept := map[string]*azdispatch.Delivery{}
	defer func() {
		// Visible at once rather than in 30 s, so that the next look shows
		// them; a failure only means they reappear when their time ends.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, d := range kept {
			if e := poison.SetVisibility(rctx, d, 0); e != nil && !errors.Is(e, azdispatch.ErrOwnershipLost) {
				err = errors.Join(err, e)
			}
		}
	}()
	for max == 0 || deleted < max {
		want := azdispatch.MaxBatch
		if max > 0 {
			want = min(want, max-deleted)
		}
		batch, err := poison.Receive(ctx, want, purgeVisibility)
		if err != nil {
			var se *azdispatch.StorageError
			if errors.As(err, &se) && se.Code == "QueueNotFound" {
				return deleted, nil // never created: nothing was poisoned there
			}
			return deleted, err
		}
		fresh := 0
		for i, d := range batch {
			if seen[d.ID] {
				kept[d.ID] = d // its latest receipt
				continue
			}
			seen[d.ID] = true
			fresh++
			env, perr := azdispatch.ParsePoison(d.Text)
			if perr != nil || !match(env) || (max > 0 && deleted >= max) {
				kept[d.ID] = d
				continue
			}
			if err := poison.Delete(ctx, d); err != nil {
				// Stopped here: this one and the rest of the batch, received
				// and hidden, are made visible again with what it kept.
				for _, rest := range batch[i:] {
					kept[rest.ID] = rest
				}
				return deleted, err
			}
			deleted++
			if each != nil {
				each()
			}
		}
		if fresh == 0 {
			return deleted, nil
		}
	}
	return deleted, nil
}
