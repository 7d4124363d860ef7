package txcount

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCountersNestAndEachCountsWhatItsContextDid(t *testing.T) {
	t.Parallel()
	var outer, inner Counter
	Add(context.Background(), Receive) // no counter: nothing to count in
	octx := With(context.Background(), &outer)
	ictx := With(octx, &inner)
	Add(octx, Send)
	Add(ictx, Receive)
	AddEmpty(ictx)
	assert.EqualValues(t, 1, outer.Load(Send))
	assert.EqualValues(t, 1, outer.Load(Receive), "an inner counter does not hide an outer one")
	assert.EqualValues(t, 1, outer.Empty())
	assert.Zero(t, inner.Load(Send), "what the outer context did is not the inner one's")
	assert.EqualValues(t, 1, inner.Load(Receive))
	assert.Equal(t, BlobRead, Named("blob read"))
	assert.Equal(t, Other, Named("peek"))
}
