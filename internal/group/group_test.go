package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
)

func spec(id string, size int, rule Rule) Spec {
	return Spec{ID: id, Size: size, Rule: rule, Then: []byte("then " + id), Queue: "next", Life: time.Hour}
}

func TestRefRoundTripsAndRefusesWhatNoSpecGives(t *testing.T) {
	refs := spec("g-1", 1000, OnFinish).Refs()
	r := refs(999)
	assert.Equal(t, Ref{Group: "g-1", Index: 999, Size: 1000, Shards: 16, Rule: OnFinish}, r)
	back, err := ParseRef(r.String())
	require.NoError(t, err)
	assert.Equal(t, r, back)
	for _, bad := range []string{"", "1/s/10/1/10/g", "1/s/10/2/1/g", "1/z/10/1/1/g", "2/s/10/1/1/g", "1/s/10/1/1/g/h", "1/s/0/1/0/g", "1/s/10/1/-1/g"} {
		_, err := ParseRef(bad)
		assert.ErrorIs(t, err, ErrCorrupt, "%q", bad)
	}
}

func TestSpecChecks(t *testing.T) {
	assert.NoError(t, spec("a", 1, OnSuccess).Check())
	for name, s := range map[string]Spec{
		"no id":       spec("", 1, OnSuccess),
		"a slash":     spec("a/b", 1, OnSuccess),
		"dots":        spec("..", 1, OnSuccess),
		"no children": spec("a", 0, OnSuccess),
		"too many":    spec("a", MaxChildren+1, OnSuccess),
		"no-rule":     spec("a", 1, 0),
		"no life":     {ID: "a", Size: 1, Rule: OnSuccess},
	} {
		assert.Error(t, s.Check(), name)
	}
}

// The head of a full group, every child with the longest result or
// reason, is read within the bound.
func TestAFullGroupsMarksStayWithinTheReadBound(t *testing.T) {
	longest := Child{Index: MaxChildren - 1, Failed: true, Reason: strings.Repeat(`"`, MaxReason)}
	withResult := Child{Index: MaxChildren - 1, Result: make([]byte, MaxResult)}
	a, err := line(block{Child: &longest})
	require.NoError(t, err)
	b, err := line(block{Child: &withResult})
	require.NoError(t, err)
	perChild := max(len(a), len(b))
	// A head's shard marks hold each child once, plus a few bytes per shard.
	assert.Less(t, perChild*MaxChildren+100*shardsFor(MaxChildren), maxBlob)
	assert.Equal(t, strings.Repeat(" ", 4)+"\uFFFD<", printable("\x00\n\t\u2028\xff<"), "control characters are spaces; invalid bytes replaced")
}

func TestShardsSpreadChildren(t *testing.T) {
	for _, size := range []int{1, 63, 64, 65, 256, 1000, 10_000, MaxChildren} {
		shards := shardsFor(size)
		total := 0
		for k := range shards {
			n := inShard(size, shards, k)
			assert.LessOrEqual(t, n, shardChildren, "size %d shard %d", size, k)
			total += n
		}
		assert.Equal(t, size, total, "size %d", size)
		assert.Less(t, shardsFor(size), blobs.MaxBlocks, "a head holds a mark per shard")
	}
}

// A group's finishes, each once, in order: the last completes it, and no
// finish before it; the requests stay within two per child and three
// per group.
func TestTheLastFinishCompletesTheGroup(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, 3, 64, 700} {
		for _, rule := range []Rule{OnSuccess, OnFinish} {
			t.Run(fmt.Sprintf("%d children, on %s", size, rule), func(t *testing.T) {
				b := blobs.NewMemory("groups", nil, nil)
				s := New(b, "groups/", nil)
				sp := spec("g", size, rule)
				require.NoError(t, s.Create(ctx, sp))
				refs := sp.Refs()
				for i := range size {
					c := Child{Result: []byte(fmt.Sprint(i))}
					if rule == OnFinish && i%7 == 3 {
						c = Child{Failed: true, Reason: "boom"}
					}
					done, err := s.Finish(ctx, refs(i), c)
					require.NoError(t, err)
					if i < size-1 {
						require.Nil(t, done, "child %d of %d", i, size)
						continue
					}
					require.NotNil(t, done, "the last child completes it")
					assert.Equal(t, []byte("then g"), done.Then)
					assert.Len(t, done.Children, size)
					assert.Equal(t, size, done.Succeeded+done.Failed)
					for j, c := range done.Children {
						assert.Equal(t, j, c.Index)
					}
				}
				require.NoError(t, s.Continued(ctx, "g"), "the continuation sent")
				st, err := s.Status(ctx, "g")
				require.NoError(t, err)
				assert.True(t, st.Complete)
				assert.Zero(t, st.Pending)
				statusReads := int64(1)
				if st.Shards > 1 {
					statusReads += int64(st.Shards)
				}
				total := b.Requests(blobs.OpWrite) + b.Requests(blobs.OpRead) - statusReads
				t.Logf("%d children in %d shards: %d requests, %.3f per child", size, st.Shards, total, float64(total)/float64(size))
				assert.LessOrEqual(t, total, int64(2*size+3), "at most 2 per child and 3 per group")

				reads := b.Requests(blobs.OpRead)
				results, err := s.Results(ctx, "g")
				require.NoError(t, err)
				assert.Equal(t, reads+1, b.Requests(blobs.OpRead), "a complete group's results are in its head")
				for i := range size {
					if rule == OnFinish && i%7 == 3 {
						assert.NotContains(t, results, i, "a failure leaves no result")
					} else {
						assert.Equal(t, []byte(fmt.Sprint(i)), results[i])
					}
				}
			})
		}
	}
}

// A continuation too long for the head's metadata takes its first block;
// the group works the same.
func TestALongContinuationTakesABlock(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, 300} {
		b := blobs.NewMemory("groups", nil, nil)
		s := New(b, "groups/", nil)
		sp := spec("long", size, OnSuccess)
		sp.Then = []byte(strings.Repeat("x", 5000))
		_, small := definition{Then: sp.Then}.inline()
		require.False(t, small)
		require.NoError(t, s.Create(ctx, sp))
		require.NoError(t, s.Create(ctx, sp), "again: the same group")
		other := sp
		other.Then = []byte(strings.Repeat("y", 5000))
		require.ErrorIs(t, s.Create(ctx, other), ErrExists)
		writes := b.Requests(blobs.OpWrite) + b.Requests(blobs.OpRead)
		var done *Done
		for i := range size {
			d, err := s.Finish(ctx, sp.Refs()(i), Child{})
			require.NoError(t, err)
			if d != nil {
				require.Nil(t, done, "reported once when each finishes once")
				done = d
			}
		}
		require.NotNil(t, done)
		assert.Equal(t, sp.Then, done.Then)
		total := b.Requests(blobs.OpWrite) + b.Requests(blobs.OpRead) - writes
		assert.LessOrEqual(t, total, int64(2*size), "the finishes alone")
	}
}

func TestOnFailureCompletesAtTheFirstFailure(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{5, 600} {
		b := blobs.NewMemory("groups", nil, nil)
		s := New(b, "groups/", nil)
		sp := spec("f", size, OnFailure)
		require.NoError(t, s.Create(ctx, sp))
		refs := sp.Refs()
		for i := range size - 1 {
			done, err := s.Finish(ctx, refs(i), Child{})
			require.NoError(t, err)
			require.Nil(t, done, "successes never complete it")
		}
		done, err := s.Finish(ctx, refs(size-1), Child{Failed: true, Reason: "bad input"})
		require.NoError(t, err)
		require.NotNil(t, done)
		assert.Equal(t, Failed, done.Outcome)
		assert.Equal(t, []Child{{Index: size - 1, Failed: true, Reason: "bad input"}}, done.Children)
	}
}

// Under OnSuccess a failed child keeps the group waiting; requeued, it
// succeeds and completes the group.
func TestOnSuccessWaitsForAFailedChildRequeued(t *testing.T) {
	ctx := context.Background()
	s := New(blobs.NewMemory("groups", nil, nil), "groups/", nil)
	sp := spec("w", 3, OnSuccess)
	require.NoError(t, s.Create(ctx, sp))
	refs := sp.Refs()
	for i, c := range []Child{{}, {Failed: true, Reason: "poisoned"}, {}} {
		done, err := s.Finish(ctx, refs(i), c)
		require.NoError(t, err)
		require.Nil(t, done)
	}
	st, err := s.Status(ctx, "w")
	require.NoError(t, err)
	assert.False(t, st.Complete)
	assert.Equal(t, []Child{{Index: 1, Failed: true, Reason: "poisoned"}}, st.Failures)
	done, err := s.Finish(ctx, refs(1), Child{Result: []byte("ok")})
	require.NoError(t, err)
	require.NotNil(t, done, "the requeued child succeeds")
	assert.Equal(t, Succeeded, done.Outcome)
	assert.Equal(t, []byte("ok"), done.Children[1].Result)
}

func TestCreateAgainIsTheSameGroup(t *testing.T) {
	ctx := context.Background()
	b := blobs.NewMemory("groups", nil, nil)
	s := New(b, "groups/", nil)
	require.NoError(t, s.Create(ctx, spec("c", 600, OnSuccess)))
	require.NoError(t, s.Create(ctx, spec("c", 600, OnSuccess)), "a creator that runs again")
	other := spec("c", 600, OnSuccess)
	other.Then = []byte("something else")
	require.ErrorIs(t, s.Create(ctx, other), ErrExists)

	// A creator that died between its two requests: the next run writes
	// the definition.
	_, err := b.CreateAppend(ctx, "groups/half", nil)
	require.NoError(t, err)
	_, err = s.Status(ctx, "half")
	require.ErrorIs(t, err, errNoDefinition)
	require.NoError(t, s.Create(ctx, spec("half", 2, OnSuccess)))
	st, err := s.Status(ctx, "half")
	require.NoError(t, err)
	assert.Equal(t, 2, st.Pending)

	_, err = s.Finish(ctx, spec("gone", 2, OnSuccess).Refs()(0), Child{})
	require.ErrorIs(t, err, ErrNotFound, "a finish of a group that is gone")
	_, err = s.Status(ctx, "gone")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestAResultOverItsBoundIsRefused(t *testing.T) {
	ctx := context.Background()
	s := New(blobs.NewMemory("groups", nil, nil), "groups/", nil)
	sp := spec("r", 1, OnFinish)
	require.NoError(t, s.Create(ctx, sp))
	_, err := s.Finish(ctx, sp.Refs()(0), Child{Result: make([]byte, MaxResult+1)})
	require.Error(t, err)
	done, err := s.Finish(ctx, sp.Refs()(0), Child{Failed: true, Reason: string(make([]byte, 10*MaxReason))})
	require.NoError(t, err)
	require.NotNil(t, done, "a long reason is cut, not refused")
	assert.Len(t, done.Children[0].Reason, MaxReason)
	assert.Nil(t, done.Children[0].Result, "a failure carries no result")
}

// Many workers finish a group's children at once, each child one to
// three times (a message delivered again), while storage fails requests
// and loses the answers of some that took effect; a finish that fails is
// made again, as a message's next delivery would. Whatever the seed:
// every group completes, and no finish reports a group complete before
// every child it needs had a finish begun.
func TestRandomizedFinishesCompleteEachGroup(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	var rmu sync.Mutex
	chance := func(p float64) bool { rmu.Lock(); defer rmu.Unlock(); return rng.Float64() < p }
	hook := func(ctx context.Context, op blobs.Op, name string) (error, bool) {
		switch {
		case chance(0.03):
			return errors.New("503 server busy"), false
		case chance(0.03):
			return nil, true // took effect, answer lost
		}
		return nil, false
	}
	ctx := context.Background()
	for round := range 6 {
		b := blobs.NewMemory("groups", nil, hook)
		s := New(b, "groups/", nil)
		rmu.Lock()
		size := 1 + rng.IntN(800)
		rule := []Rule{OnSuccess, OnFinish}[rng.IntN(2)]
		rmu.Unlock()
		sp := spec(fmt.Sprintf("r%d", round), size, rule)
		for s.Create(ctx, sp) != nil {
		}
		refs := sp.Refs()
		type job struct {
			i    int
			fail bool
		}
		jobs := make(chan job, 4*size)
		var left sync.WaitGroup
		var begun, succeededBegun atomic.Int64
		started := make([]atomic.Bool, size)
		okStarted := make([]atomic.Bool, size)
		for i := range size {
			fail := chance(0.1)
			if fail && rule == OnSuccess {
				jobs <- job{i, true} // poisoned first, then requeued
				fail = false
			}
			jobs <- job{i, fail}
			if chance(0.2) {
				jobs <- job{i, fail} // a duplicate delivery
			}
		}
		var dones atomic.Int64
		left.Add(len(jobs))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for j := range jobs {
					if !started[j.i].Swap(true) {
						begun.Add(1)
					}
					if !j.fail && !okStarted[j.i].Swap(true) {
						succeededBegun.Add(1)
					}
					c := Child{Failed: j.fail, Reason: "r"}
					done, err := s.Finish(ctx, refs(j.i), c)
					need := begun.Load() // read after: every finish it saw had begun before
					if rule == OnSuccess {
						need = succeededBegun.Load()
					}
					if err != nil {
						jobs <- j // redelivered
						continue
					}
					if done != nil {
						dones.Add(1)
						assert.Equal(t, int64(size), need, "complete only once every child it needs has begun a finish")
						assert.Len(t, done.Children, size)
					}
					left.Done()
				}
			})
		}
		left.Wait()
		close(jobs)
		wg.Wait()
		assert.GreaterOrEqual(t, dones.Load(), int64(1), "round %d: %d children on %s: some finish completes it", round, size, rule)
		t.Logf("round %d: %d children on %s, completed by %d finishes", round, size, rule, dones.Load())
	}
}

func FuzzParseRef(f *testing.F) {
	f.Add(spec("g", 1000, OnFinish).Refs()(3).String())
	f.Add("1/s/1/1/0/a")
	f.Add("1/x/300/2/299/a.b-c_d")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseRef(text)
		if err != nil {
			return
		}
		require.NoError(t, r.check())
		back, err := ParseRef(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, back)
	})
}

// A blob that is not what this package writes is refused with
// ErrCorrupt, not read into a group.
func TestHostileBlobsAreRefused(t *testing.T) {
	ctx := context.Background()
	b := blobs.NewMemory("groups", nil, nil)
	s := New(b, "groups/", nil)
	for name, blocks := range map[string][]string{
		"junk":      {"not json\n"},
		"no-rule":   {`{"d":{"size":2,"rule":"","shards":1}}` + "\n"},
		"bad-size":  {`{"d":{"size":-1,"rule":"s","shards":1}}` + "\n"},
		"bad-shard": {`{"d":{"size":5000,"rule":"s","shards":1}}` + "\n"},
	} {
		_, err := b.CreateAppend(ctx, "groups/"+name, nil)
		require.NoError(t, err)
		for _, blk := range blocks {
			_, err := b.Append(ctx, "groups/"+name, []byte(blk))
			require.NoError(t, err)
		}
		_, err = s.Status(ctx, name)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
	_, err := s.Status(ctx, "../escape")
	assert.Error(t, err, "an ID that names another blob")
}

// Once its continuation is marked sent, a group found complete again (a
// child's message delivered once more) is reported by no finish; deleted,
// its children's finishes fail with ErrNotFound, and a second delete is
// no error.
func TestContinuedAndDeleted(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		size int
		rule Rule
	}{{2, OnSuccess}, {600, OnFinish}, {600, OnFailure}} {
		b := blobs.NewMemory("groups", nil, nil)
		s := New(b, "groups/", nil)
		sp := spec("c", tt.size, tt.rule)
		require.NoError(t, s.Create(ctx, sp))
		refs := sp.Refs()
		var done *Done
		for i := range tt.size {
			d, err := s.Finish(ctx, refs(i), Child{Failed: tt.rule == OnFailure && i == 0})
			require.NoError(t, err)
			if d != nil {
				done = d
			}
		}
		require.NotNil(t, done, "%d on %s", tt.size, tt.rule)
		require.NoError(t, s.Continued(ctx, "c"))
		d, err := s.Finish(ctx, refs(0), Child{Failed: tt.rule == OnFailure})
		require.NoError(t, err)
		assert.Nil(t, d, "%d on %s: continued, it is not reported again", tt.size, tt.rule)
		st, err := s.Status(ctx, "c")
		require.NoError(t, err)
		assert.True(t, st.Complete)

		require.NoError(t, s.Delete(ctx, "c"))
		require.NoError(t, s.Delete(ctx, "c"), "gone already")
		_, err = s.Finish(ctx, refs(1), Child{})
		require.ErrorIs(t, err, ErrNotFound)
		require.ErrorIs(t, s.Continued(ctx, "c"), ErrNotFound)
		n := 0
		require.NoError(t, b.List(ctx, "", func(infos []blobs.Info, _ time.Time) error { n += len(infos); return nil }))
		assert.Zero(t, n, "no blob is left")
	}
}

// Owns knows a group's head and shards by their names, and nothing else:
// a sweep removes only what it owns.
func TestAStoreOwnsOnlyItsGroupsNames(t *testing.T) {
	s := New(nil, "groups/", nil)
	for _, name := range []string{"groups/a", "groups/resize-2026.01_x", "groups/a/0", "groups/a/1562"} {
		assert.True(t, s.Owns(name), name)
	}
	for _, name := range []string{"groups/", "groups/a/", "groups/a/b", "groups/a/01", "groups/a/-1", "groups/a/1563",
		"groups/a/0/0", "groups/..", "groups/a b", "status/a", "a", "0123456789abcdef0123456789abcdef"} {
		assert.False(t, s.Owns(name), name)
	}
}

// Of a child's finishes, the tally keeps a success over a failure, and of
// two of a kind the first, unless a later one carries what the first
// lacks: what a continuation read stays what the status says.
func TestATallyKeepsAChildsFirstFinishOfItsKind(t *testing.T) {
	mark := func(c Child) block { return block{Child: &c} }
	for _, tt := range []struct {
		name  string
		marks []block
		want  Child
	}{
		{"two results", []block{mark(Child{Result: []byte("A")}), mark(Child{Result: []byte("B")})}, Child{Result: []byte("A")}},
		{"two reasons", []block{mark(Child{Failed: true, Reason: "a"}), mark(Child{Failed: true, Reason: "b"})}, Child{Failed: true, Reason: "a"}},
		{"a success after a failure", []block{mark(Child{Failed: true, Reason: "a"}), mark(Child{Result: []byte("B")})}, Child{Result: []byte("B")}},
		{"a failure after a success", []block{mark(Child{Result: []byte("A")}), mark(Child{Failed: true, Reason: "b"})}, Child{Result: []byte("A")}},
		{"a result after none", []block{mark(Child{}), mark(Child{Result: []byte("B")})}, Child{Result: []byte("B")}},
		{"none after a result", []block{mark(Child{Result: []byte("A")}), mark(Child{})}, Child{Result: []byte("A")}},
		{"a reason after none", []block{mark(Child{Failed: true}), mark(Child{Failed: true, Reason: "b"})}, Child{Failed: true, Reason: "b"}},
	} {
		assert.Equal(t, map[int]Child{0: tt.want}, tally(tt.marks), tt.name)
	}
}
