package azdispatch

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHandledMemoIsBoundedAndKnowsTextFromID(t *testing.T) {
	t.Parallel()
	m := newHandledMemo()
	first := &Delivery{ID: "m0", Text: "a"}
	assert.False(t, m.handled(first))
	m.remember(first)
	assert.True(t, m.handled(first))
	assert.False(t, m.handled(&Delivery{ID: "m0", Text: "b"}), "the same ID with other text is another message")

	for i := 1; i <= handledMemoSize; i++ {
		m.remember(&Delivery{ID: fmt.Sprint("m", i), Text: "a"})
	}
	assert.False(t, m.handled(first), "the oldest is forgotten past the bound")
	assert.True(t, m.handled(&Delivery{ID: fmt.Sprint("m", handledMemoSize), Text: "a"}))
	assert.LessOrEqual(t, len(m.keys), handledMemoSize)

	last := &Delivery{ID: fmt.Sprint("m", handledMemoSize), Text: "a"}
	m.forget(last)
	assert.False(t, m.handled(last))
}
