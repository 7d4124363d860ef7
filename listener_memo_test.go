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
	assert.Zero(t, m.settled(first))
	m.remember(first, settledHandled)
	assert.Equal(t, settledHandled, m.settled(first))
	assert.Zero(t, m.settled(&Delivery{ID: "m0", Text: "b"}), "the same ID with other text is another message")

	for i := 1; i <= handledMemoSize; i++ {
		m.remember(&Delivery{ID: fmt.Sprint("m", i), Text: "a"}, settledHandled)
	}
	assert.Zero(t, m.settled(first), "the oldest is forgotten past the bound")
	last := &Delivery{ID: fmt.Sprint("m", handledMemoSize), Text: "a"}
	assert.Equal(t, settledHandled, m.settled(last))
	assert.LessOrEqual(t, len(m.keys), handledMemoSize)

	m.remember(last, settledPoisoned)
	assert.Equal(t, settledPoisoned, m.settled(last), "the latest outcome is kept")
	m.forget(last)
	assert.Zero(t, m.settled(last))
}
