package jumphash

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestShardMovesAboutOneInNPlusOneKeys(t *testing.T) {
	t.Parallel()
	const keys = 20000
	for _, n := range []int{1, 2, 3, 9, 10, 29} {
		moved := 0
		counts := make([]int, n+1)
		for k := range keys {
			key := fmt.Sprintf("customer-%d", k)
			before, after := Shard(key, n), Shard(key, n+1)
			counts[after]++
			if before != after {
				moved++
				assert.Equal(t, n, after, "a key only moves to the new shard")
			}
		}
		want := float64(keys) / float64(n+1)
		assert.InDelta(t, want, float64(moved), want*0.1, "n=%d: about 1/(n+1) of the keys move", n)
		for i, c := range counts {
			assert.InDelta(t, want, float64(c), want*0.1, "n+1=%d: shard %d gets its share", n+1, i)
		}
	}
}

func TestShardIsStable(t *testing.T) {
	t.Parallel()
	// These values are part of the contract: keys must stay on their shards
	// across processes and versions.
	stable := []int{5, 9, 4, 14}
	got := []int{Shard("", 10), Shard("a", 10), Shard("customer-42", 10), Shard("order/7", 30)}
	assert.Equal(t, stable, got)
	assert.Equal(t, 0, Shard("anything", 1))
	assert.Equal(t, 0, Shard("anything", 0))
}
