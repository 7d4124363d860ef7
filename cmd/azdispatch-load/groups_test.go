package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// 45 seconds of the groups soak, end to end: three worker processes (this
// test binary again, see TestMain) killed, paused and given storage
// faults, groups of up to 300 children under every rule, sent at a pace a
// loaded machine running the race detector keeps up with. Only the verdict
// is asserted, and that faults were made; the seed is logged, so that a
// failure can be replayed with -seed.
func TestGroupsSoakContinuesEachGroupOnce(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	t.Parallel()
	rec := runSoak[groupsRecord](t, runGroups, options{groups: groupsConfig{
		Duration: 45 * time.Second, MaxChildren: 300, Backlog: 400, Rate: 40, Only: "soak",
		KillEvery: [2]time.Duration{2 * time.Second, 5 * time.Second}, PauseEvery: [2]time.Duration{5 * time.Second, 10 * time.Second},
	}})
	assert.True(t, rec.OK, "%+v", rec.Problems)
	assert.Positive(t, rec.Groups)
	assert.Equal(t, rec.Expected, rec.Continued)
	assert.Positive(t, rec.Kills, "kills")
	assert.LessOrEqual(t, rec.BlobRequests, rec.Budget)
}

// The big variant, shrunk: groups of 2,000 children one after another,
// each continued once. How soon is measured and printed, not asserted:
// the machine is shared.
func TestGroupsBigVariantContinuesEachGroup(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	t.Parallel()
	var progress bytes.Buffer
	recs, lines, err := runGroups(t.Context(), options{groups: groupsConfig{Only: "big", BigGroups: 2, BigSize: 2000, BigBound: time.Hour}}, &progress)
	t.Log("\n" + progress.String() + strings.Join(lines, "\n"))
	if !assert.NoError(t, err) || !assert.Len(t, recs, 1) {
		return
	}
	rec := recs[0].Own.(groupsRecord)
	assert.True(t, rec.OK, "%+v", rec.Problems)
	assert.Equal(t, 2, rec.Continued)
	assert.Positive(t, rec.LatencyMaxS)
}

// The judge finds a continuation sent twice, one too early, one that says
// the wrong thing and one for a group whose rule is not met.
func TestTheGroupsJudgeFindsWhatIsWrong(t *testing.T) {
	t.Parallel()
	r := &groupsRun{variant: "soak", groups: map[string]*groupsSpec{}, ends: map[[2]any]int{}, firstEnd: map[[2]any]int64{},
		nexts: map[string][]groupsNext2{}, kills: 1, pauses: 1}
	add := func(id string, size int, rule azdispatch.GroupRule, fails ...int) {
		g := &groupsSpec{id: id, size: size, rule: rule, fails: map[int]bool{}, sentAll: true}
		for _, i := range fails {
			g.fails[i] = true
		}
		r.groups[id], r.order = g, append(r.order, id)
		for i := range size {
			r.firstEnd[[2]any{id, i}], r.ends[[2]any{id, i}] = int64(100+i), 1
		}
	}
	ok := func(id string, size, failed int) *azdispatch.GroupOutcome {
		o := &azdispatch.GroupOutcome{ID: id, Size: size, Succeeded: size - failed, Failed: failed, Outcome: "succeeded"}
		if failed > 0 {
			o.Outcome = "failed"
		}
		return o
	}
	add("right", 3, azdispatch.ContinueOnFinish, 1)
	r.nexts["right"] = []groupsNext2{{id: "m1", at: 200, outcome: ok("right", 3, 1)}, {id: "m1", at: 300, outcome: ok("right", 3, 1)}}
	add("twice", 2, azdispatch.ContinueOnSuccess)
	r.nexts["twice"] = []groupsNext2{{id: "m2", at: 200, outcome: ok("twice", 2, 0)}, {id: "m3", at: 210, outcome: ok("twice", 2, 0)}}
	add("early", 2, azdispatch.ContinueOnSuccess)
	r.nexts["early"] = []groupsNext2{{id: "m4", at: 100, outcome: ok("early", 2, 0)}}
	add("wrong", 2, azdispatch.ContinueOnFinish, 0)
	r.nexts["wrong"] = []groupsNext2{{id: "m5", at: 200, outcome: ok("wrong", 2, 0)}}
	add("unmet", 2, azdispatch.ContinueOnFailure)
	r.nexts["unmet"] = []groupsNext2{{id: "m6", at: 200, outcome: ok("unmet", 2, 1)}}
	add("missing", 2, azdispatch.ContinueOnSuccess)
	r.acct = nil
	rec := r.judgeCounts()
	assert.Equal(t, 1, rec.Twice)
	assert.Equal(t, 1, rec.Early)
	assert.Equal(t, 1, rec.Wrong)
	assert.Equal(t, 1, rec.Unexpected)
	assert.Equal(t, 1, rec.Missing)
	assert.Equal(t, 5, rec.Expected)
	assert.False(t, rec.OK)
}
