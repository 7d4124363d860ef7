package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The keys scenario's judge counts a key's calls that overlap, and a
// message whose first call started after a later one of its key; a
// repeated call (a redelivery after the kill) is neither.
func TestTheKeysJudgeCountsOverlapsAndOrder(t *testing.T) {
	t.Parallel()
	calls := []keysCall{
		{key: "a", n: 1, start: 10, end: 20},
		{key: "a", n: 3, start: 20, end: 30},
		{key: "a", n: 2, start: 25, end: 40}, // overlaps 3, and after it
		{key: "a", n: 1, start: 50, end: 60}, // a repeat: in no order
		{key: "b", n: 4, start: 12, end: 18},
	}
	var r keysRecord
	r.Messages = 4
	judgeKeys(&r, calls, map[int]int{1: 2, 2: 1, 3: 1, 4: 1}, nil, true, true)
	assert.Equal(t, 1, r.OutOfOrder)
	assert.Equal(t, 1, r.Overlaps, "2 over 3; 3 starts as 1 ends; the repeat of 1 after them all")
	assert.Equal(t, 1, r.Repeated)
	assert.Zero(t, r.Lost)

	r = keysRecord{Messages: 4}
	judgeKeys(&r, calls, map[int]int{1: 2, 2: 1, 3: 1, 4: 1}, nil, true, false)
	assert.Zero(t, r.OutOfOrder, "order is judged only where it is promised")
}
