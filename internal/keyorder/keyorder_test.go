package keyorder

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAStampReadsBackAndAnythingElseIsNone(t *testing.T) {
	t.Parallel()
	s := Stamp{Pub: "0123456789abcdef", N: 42, Prev: 7}
	got, ok := ParseStamp(s.String())
	require.True(t, ok)
	assert.Equal(t, s, got)
	for _, bad := range []string{"", "x", "0123456789abcdef.1", "0123456789ABCDEF.2.1", "0123456789abcdef.0.0",
		"0123456789abcdef.3.3", "0123456789abcdef.3.4", "0123456789abcdef.-1.0", "0123456789abcdef.2.1.0", "0123456789abcde.2.1"} {
		_, ok := ParseStamp(bad)
		assert.False(t, ok, "%q", bad)
	}
}

func FuzzParseStamp(f *testing.F) {
	f.Add("0123456789abcdef.42.7")
	f.Add("0123456789abcdef.1.0")
	f.Fuzz(func(t *testing.T, v string) {
		s, ok := ParseStamp(v)
		if !ok {
			return
		}
		if s.Prev >= s.N || s.N == 0 {
			t.Fatalf("%q read as %+v", v, s)
		}
		if again, ok := ParseStamp(s.String()); !ok || again != s {
			t.Fatalf("%q read as %+v, which reads back as %+v", v, s, again)
		}
	})
}

func TestASequencerFollowsTheKeysLastSuccessfulSend(t *testing.T) {
	t.Parallel()
	q := NewSequencer()
	a1 := q.Next("a")
	assert.Zero(t, a1.Prev, "a key's first message follows none")
	q.Sent("a", a1)
	b1 := q.Next("b")
	assert.Zero(t, b1.Prev, "each key has its own order")
	a2 := q.Next("a")
	assert.Equal(t, a1.N, a2.Prev)
	// a2's send failed: a3 follows a1, the last that went out.
	a3 := q.Next("a")
	assert.Equal(t, a1.N, a3.Prev)
	assert.Greater(t, a3.N, a2.N, "numbers only grow")
	// Two sends at once follow the same one, in no order between them.
	q.Sent("a", a3)
	x, y := q.Next("a"), q.Next("a")
	assert.Equal(t, a3.N, x.Prev)
	assert.Equal(t, a3.N, y.Prev)
	q.Sent("a", y)
	q.Sent("a", x) // finished last, but y is later
	assert.Equal(t, y.N, q.Next("a").Prev)
	assert.NotEqual(t, q.pub, NewSequencer().pub)
}

func TestASequencerForgetsKeysIdleLongEnough(t *testing.T) {
	t.Parallel()
	q := NewSequencer()
	q.Sent("old", q.Next("old"))
	for i := range remembered {
		k := fmt.Sprint(i)
		q.Sent(k, q.Next(k))
	}
	assert.Zero(t, q.Next("old").Prev, "forgotten: it follows none")
	assert.NotZero(t, q.Next(fmt.Sprint(remembered-1)).Prev)
	assert.LessOrEqual(t, len(q.cur)+len(q.old), remembered)
}

func TestAStateReadsBackFromItsMetadataAndKeepsTheOthers(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	var s State
	a, b := "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	s.Done(Stamp{Pub: a, N: 5, Prev: 4}, now, true)
	require.Equal(t, Verdict{Changed: true}, s.Judge(Stamp{Pub: b, N: 9, Prev: 8}, now, time.Minute))
	meta := s.Meta(map[string]string{"azdispatchkey": "1", "o_cccccccccccccccc": "1.0.0.0"})
	assert.Equal(t, "1", meta["azdispatchkey"])
	assert.NotContains(t, meta, "o_cccccccccccccccc", "an entry not in the state is not written back")
	again := Load(meta)
	assert.Equal(t, s, again)
	assert.Equal(t, Verdict{Run: true}, again.Judge(Stamp{Pub: a, N: 6, Prev: 5}, now, time.Minute))
	assert.Equal(t, Verdict{}, again.Judge(Stamp{Pub: b, N: 9, Prev: 8}, now.Add(time.Second), time.Minute), "waiting, as noted")

	for i := range 2 * maxPubs {
		s.Done(Stamp{Pub: fmt.Sprintf("%016x", i), N: 1}, now.Add(time.Duration(i)*time.Second), true)
	}
	kept := Load(s.Meta(nil))
	assert.Len(t, kept.pubs, maxPubs, "the publishers heard of last")
	assert.Contains(t, kept.pubs, fmt.Sprintf("%016x", 2*maxPubs-1))
	assert.NotContains(t, kept.pubs, a)

	for _, bad := range []string{"", "1.2.3", "x.0.0.0", "1.-1.0.0"} {
		assert.Empty(t, Load(map[string]string{"o_" + a: bad}).pubs, "%q", bad)
	}
}

// One publisher's messages of a key, each visible at a random moment of a
// minute and snoozed for a second while it must wait, some never coming at
// all: each runs after the one it follows, and a missing one is given up
// once the key has been stuck for the wait; every message that comes runs
// once.
func TestAKeysMessagesRunInOrderAndAMissingOneIsGivenUpAfterTheWait(t *testing.T) {
	t.Parallel()
	const wait = 2 * time.Minute
	start := time.Unix(1_800_000_000, 0)
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		q := NewSequencer()
		n := 2 + rng.IntN(40)
		stamps := make([]Stamp, n)
		for i := range stamps {
			stamps[i] = q.Next("k")
			if rng.IntN(10) > 0 { // 1 in 10 sends fails: the next follows the one before
				q.Sent("k", stamps[i])
			}
		}
		visible := map[int]time.Time{} // the messages that come, and when they are visible next
		for i := range n {
			if rng.IntN(8) > 0 { // 1 in 8 never comes (expired, purged)
				visible[i] = start.Add(time.Duration(rng.IntN(60_000)) * time.Millisecond)
			}
		}
		came := len(visible)
		var s State
		var order []int
		skips := 0
		gaveUp := map[uint64]bool{} // predecessors given up: the order after them is not promised
		for steps := 0; len(visible) > 0; steps++ {
			require.Less(t, steps, 100_000, "seed %d: stuck", seed)
			i, now := -1, time.Time{}
			for j, at := range visible {
				if i < 0 || at.Before(now) || at.Equal(now) && j < i {
					i, now = j, at
				}
			}
			before := s.pubs[stamps[i].Pub].done
			v := s.Judge(stamps[i], now, wait)
			if v.GaveUp {
				skips++
				for n := before + 1; n <= s.pubs[stamps[i].Pub].done; n++ {
					gaveUp[n] = true
				}
			}
			if v.Run {
				s.Done(stamps[i], now, true)
				order = append(order, i)
				delete(visible, i)
			} else {
				visible[i] = now.Add(time.Second) // snoozed
			}
		}
		assert.Len(t, order, came, "seed %d: every message that came ran once", seed)
		pos := map[uint64]int{}
		for p, i := range order {
			pos[stamps[i].N] = p
		}
		for _, i := range order {
			st := stamps[i]
			if p, ok := pos[st.Prev]; ok && !gaveUp[st.Prev] {
				assert.Less(t, p, pos[st.N], "seed %d: %d ran before %d, which it follows", seed, st.N, st.Prev)
			}
		}
		if came == n {
			assert.Zero(t, skips, "seed %d: nothing missing, nothing given up", seed)
		}
	}
}

// A handled message is known as handled, across a write and a read, for
// its key's last few; one given up as poison, or skipped, is not: a copy of
// it, requeued or late, is to run.
func TestAStateKnowsTheLastMessagesHandled(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	const a = "aaaaaaaaaaaaaaaa"
	var s State
	s.Done(Stamp{Pub: a, N: 1}, now, true)
	s.Done(Stamp{Pub: a, N: 2, Prev: 1}, now, false)
	assert.True(t, s.Handled(Stamp{Pub: a, N: 1}))
	assert.False(t, s.Handled(Stamp{Pub: a, N: 2, Prev: 1}), "given up as poison")
	assert.False(t, s.Handled(Stamp{Pub: "bbbbbbbbbbbbbbbb", N: 1}), "another publisher's")
	for n := uint64(3); n <= 3+keepHandled; n++ {
		s.Done(Stamp{Pub: a, N: n, Prev: n - 1}, now, true)
	}
	again := Load(s.Meta(nil))
	assert.Equal(t, s, again)
	assert.False(t, again.Handled(Stamp{Pub: a, N: 3}), "forgotten: the last %d are kept", keepHandled)
	assert.True(t, again.Handled(Stamp{Pub: a, N: 3 + keepHandled}))
	// An entry of the earlier form, without the numbers handled, reads.
	old := Load(map[string]string{"o_" + a: "7.0.0.1800000000"})
	assert.Equal(t, Verdict{Run: true}, old.Judge(Stamp{Pub: a, N: 8, Prev: 7}, now, time.Minute))
	assert.False(t, old.Handled(Stamp{Pub: a, N: 7}))
	// Numbers that do not read make the entry unreadable, as before.
	assert.Empty(t, Load(map[string]string{"o_" + a: "7.0.0.1800000000.x-1"}).pubs)
}
