package track

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/records"
)

// store is a Store on a memory backend, whose requests the hook may fail.
func store(hook blobs.Hook) (*Store, *blobs.Memory) {
	mem := blobs.NewMemory("records", nil, hook)
	return New(records.OnBlobs(mem, records.NewClock(time.Now, nil, nil), nil), time.Hour), mem
}

func TestAMessageMovesThroughItsStatesAndStaysInTheLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, mem := store(nil)
	tok := NewToken()
	require.True(t, ValidToken(tok))
	require.NoError(t, s.Start(ctx, tok, "orders"))
	require.NoError(t, s.Start(ctx, tok, "orders"), "a send tried again")
	st, err := s.Read(ctx, tok)
	require.NoError(t, err)
	assert.Equal(t, Status{State: Pending, Queue: "orders", Updated: st.Updated}, st)

	require.NoError(t, s.Move(ctx, tok, Status{State: Delivered, Message: "m1", Tries: 1}))
	require.NoError(t, s.Move(ctx, tok, Status{State: Failed, Tries: 1, Reason: strings.Repeat("é", 300)}))
	st, err = s.Read(ctx, tok)
	require.NoError(t, err)
	assert.Equal(t, Failed, st.State)
	assert.Equal(t, "m1", st.Message, "kept from the move before")
	assert.LessOrEqual(t, len(st.Reason), MaxReason)
	assert.True(t, strings.HasPrefix(st.Reason, "é"), "cut on a rune boundary")

	require.NoError(t, s.Move(ctx, tok, Status{State: Succeeded, Tries: 2}))
	before := mem.Requests(blobs.OpWrite)
	for _, late := range []State{Delivered, Failed, Pending, Poisoned, Cancelled} {
		require.NoError(t, s.Move(ctx, tok, Status{State: late, Tries: 1}))
	}
	assert.Equal(t, before, mem.Requests(blobs.OpWrite), "no write once final")
	st, err = s.Read(ctx, tok)
	require.NoError(t, err)
	assert.Equal(t, Succeeded, st.State)
	assert.Equal(t, 2, st.Tries)
	assert.Equal(t, "orders", st.Queue)
}

func TestBadTokensAndRecordsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, mem := store(nil)
	for _, tok := range []string{"", "../x", strings.Repeat("A", TokenLen), strings.Repeat("a", TokenLen+1)} {
		_, err := s.Read(ctx, tok)
		assert.ErrorIs(t, err, ErrNotFound, "%q", tok)
		assert.ErrorIs(t, s.Start(ctx, tok, "q"), ErrCorrupt)
		assert.ErrorIs(t, s.Move(ctx, tok, Status{State: Succeeded}), ErrCorrupt)
	}
	tok := NewToken()
	_, err := s.Read(ctx, tok)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Error(t, s.Move(ctx, tok, Status{State: "bogus"}))

	_, err = mem.Create(ctx, name(tok), blobs.Write{Data: []byte("{}"), Metadata: map[string]string{}})
	require.NoError(t, err)
	_, err = s.Read(ctx, tok)
	assert.Error(t, err, "a blob that is not a record")
}

// Many writers move one message at once, through storage that fails and
// loses answers: it ends in the first final state any of them wrote,
// and a move that returned nil took effect or found the message final.
func TestConcurrentMovesEndInOneFinalState(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var mu sync.Mutex
		var armed atomic.Bool
		s, _ := store(func(_ context.Context, op blobs.Op, _ string) (error, bool) {
			if !armed.Load() {
				return nil, false
			}
			mu.Lock()
			defer mu.Unlock()
			switch x := rng.Float64(); {
			case x < 0.05:
				return errors.New("503"), false
			case x < 0.10 && op == blobs.OpWrite:
				return nil, true // done, its answer lost
			}
			return nil, false
		})
		ctx := context.Background()
		tok := NewToken()
		require.NoError(t, s.Start(ctx, tok, "q"))
		armed.Store(true)
		finals := []State{Succeeded, Poisoned, Cancelled}
		var wg sync.WaitGroup
		var firstFinal atomic.Value
		for w := range 6 {
			wg.Go(func() {
				for i := range 5 {
					st := []State{Delivered, Failed}[(w+i)%2]
					if i == 4 && w%2 == 0 {
						st = finals[w%3]
					}
					if s.Move(ctx, tok, Status{State: st, Tries: i + 1}) == nil && st.Final() {
						firstFinal.CompareAndSwap(nil, st)
					}
				}
			})
		}
		wg.Wait()
		armed.Store(false)
		got, err := s.Read(ctx, tok)
		require.NoError(t, err)
		if firstFinal.Load() != nil {
			assert.True(t, got.State.Final(), "seed %d: %s", seed, got.State)
		}
		assert.Equal(t, "q", got.Queue)
	}
}

// IsName knows a status record by its name, and nothing else: a sweep
// removes only such names.
func TestIsNameKnowsOnlyAStatusRecordsName(t *testing.T) {
	token := NewToken()
	assert.True(t, IsName(name(token)))
	for _, s := range []string{token, "status/", "status/" + token + "/x", "status/" + strings.ToUpper(token), "groups/" + token} {
		assert.False(t, IsName(s), s)
	}
}
