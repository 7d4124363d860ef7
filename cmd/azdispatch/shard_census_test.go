package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The rest of a queue's name after "<base>-" is a shard's index only if it
// is one: a number as Itoa writes it, with or without "-poison".
func TestShardIndex(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rest string
		i    int
		ok   bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"12-poison", 12, true},
		{"eu-0", 0, false}, {"07", 0, false}, {"-1", 0, false}, {"1x", 0, false}, {"", 0, false}, {"poison", 0, false},
	} {
		i, ok := shardIndex(c.rest)
		assert.Equal(t, c.ok, ok, c.rest)
		if ok {
			assert.Equal(t, c.i, i, c.rest)
		}
	}
}

// check compares the census with -shards: more shards than said, fewer,
// or a shard in the wrong account is a usage error naming what was found.
func TestShardCensusCheck(t *testing.T) {
	t.Parallel()
	labels := []string{"acct-a", "acct-b"}
	for _, c := range []struct {
		name  string
		where map[int][]int
		n     int
		says  []string // "" for no error
	}{
		{"none exist: a new set", map[int][]int{}, 4, nil},
		{"all there", map[int][]int{0: {0}, 1: {1}, 2: {0}, 3: {1}}, 4, nil},
		{"a gap below the last", map[int][]int{0: {0}, 3: {1}}, 4, nil},
		{"the same account given twice", map[int][]int{0: {0, 1}, 1: {0, 1}}, 2, nil},
		{"fewer than said", map[int][]int{0: {0}, 1: {1}, 2: {0}, 3: {1}}, 6,
			[]string{"-shards 6 does not match the set s", "make 4 shards", "s-3 (in acct-b)", "s-4 and s-5 do not exist", "Give -shards 4"}},
		{"one fewer", map[int][]int{0: {0}, 1: {1}}, 3, []string{"s-2 does not exist", "Give -shards 2"}},
		{"many fewer", map[int][]int{0: {0}}, 5, []string{"s-1 … s-4 do not exist", "Give -shards 1"}},
		{"more than said", map[int][]int{0: {0}, 1: {1}, 2: {0}, 3: {1}}, 3,
			[]string{"-shards 3 does not match the set s", "at least 4 shards", "s-3 (in acct-b) exists", "give -shards 4"}},
		{"more, known by a poison queue", map[int][]int{0: {0}, 5: {1}}, 2, []string{"at least 6 shards", "s-5 (in acct-b) exists", "give -shards 6"}},
		{"accounts swapped", map[int][]int{0: {1}, 1: {0}}, 2, []string{"s-0 (in acct-b) exists, but not in acct-a", "account i mod 2"}},
	} {
		err := (&shardCensus{base: "s", where: c.where}).check(c.n, labels)
		if c.says == nil {
			assert.NoError(t, err, c.name)
			continue
		}
		if assert.Error(t, err, c.name) {
			assert.Equal(t, exitUsage, exitCode(err), c.name)
			for _, s := range c.says {
				assert.Contains(t, err.Error(), s, c.name)
			}
		}
	}
}
