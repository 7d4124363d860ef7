package memo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHandledMemoIsBoundedAndKnowsTextFromID(t *testing.T) {
	t.Parallel()
	m := New()
	first := &Delivery{ID: "m0", Text: "a"}
	assert.Zero(t, m.settled(first))
	m.remember(first, Handled)
	assert.Equal(t, Handled, m.settled(first))
	assert.Zero(t, m.settled(&Delivery{ID: "m0", Text: "b"}), "the same ID with other text is another message")

	for i := 1; i <= Size; i++ {
		m.remember(&Delivery{ID: fmt.Sprint("m", i), Text: "a"}, Handled)
	}
	assert.Zero(t, m.settled(first), "the oldest is forgotten past the bound")
	last := &Delivery{ID: fmt.Sprint("m", Size), Text: "a"}
	assert.Equal(t, Handled, m.settled(last))
	assert.LessOrEqual(t, len(m.index), Size)

	m.remember(last, Poisoned)
	assert.Equal(t, Poisoned, m.settled(last), "the latest outcome is kept")
	m.forget(last)
	assert.Zero(t, m.settled(last))
}

// A note is kept with what became of a message, replaced by the next
// remembering, cut to MaxNote bytes without splitting a character, and
// forgotten with it.
func TestANoteIsKeptWithWhatBecameOfAMessage(t *testing.T) {
	t.Parallel()
	m := New()
	d := &Delivery{ID: "m0", Text: "a"}
	m.Remember(d.ID, d.Text, Handled, "result")
	as, note := m.Settled(d.ID, d.Text)
	assert.Equal(t, Handled, as)
	assert.Equal(t, "result", note)
	_, note = m.Settled(d.ID, "b")
	assert.Empty(t, note, "another message's text")

	long := strings.Repeat("x", MaxNote-1) + "é"
	m.Remember(d.ID, d.Text, Poisoned, long)
	as, note = m.Settled(d.ID, d.Text)
	assert.Equal(t, Poisoned, as)
	assert.Equal(t, long[:MaxNote-1], note, "cut before the character that would not fit")
	m.Forget(d.ID)
	m.Remember(d.ID, d.Text, Handled, "")
	_, note = m.Settled(d.ID, d.Text)
	assert.Empty(t, note, "forgotten with its message")
}

// The memo behaves as a list of the last Size messages
// remembered and not forgotten, whatever the order of remembering and
// forgetting: checked against that model, step by step, from a seed.
func TestHandledMemoAgreesWithAModel(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 1))
	m := New()
	var model []string // oldest first
	outcome := map[string]As{}
	ids := Size * 3 / 2
	for step := range 60_000 {
		d := &Delivery{ID: fmt.Sprint("m", r.IntN(ids)), Text: "t"}
		switch r.IntN(3) {
		case 0, 1:
			as := As(1 + r.IntN(2))
			m.remember(d, as)
			if !slices.Contains(model, d.ID) {
				model = append(model, d.ID)
				if len(model) > Size {
					delete(outcome, model[0])
					model = model[1:]
				}
			}
			outcome[d.ID] = as
		case 2:
			m.forget(d)
			if i := slices.Index(model, d.ID); i >= 0 {
				model = slices.Delete(model, i, i+1)
				delete(outcome, d.ID)
			}
		}
		require.Equal(t, outcome[d.ID], m.settled(d), "seed %d, step %d, %s", seed, step, d.ID)
		require.Len(t, m.index, len(model), "seed %d, step %d", seed, step)
	}
	for _, id := range model {
		assert.Equal(t, outcome[id], m.settled(&Delivery{ID: id, Text: "t"}), "seed %d: %s", seed, id)
	}
}

// Delivery stands for the listener's message in these tests.
type Delivery struct{ ID, Text string }

func (m *Memo) remember(d *Delivery, as As) { m.Remember(d.ID, d.Text, as, "") }
func (m *Memo) settled(d *Delivery) As {
	as, _ := m.Settled(d.ID, d.Text)
	return as
}
func (m *Memo) forget(d *Delivery) { m.Forget(d.ID) }
