package azdispatch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDoneSetEncodesRangesAndMerges(t *testing.T) {
	t.Parallel()
	s := newDoneSet(1000)
	for i := range 500 {
		s.add(i)
	}
	s.add(502)
	for i := 504; i < 1000; i++ {
		s.add(i)
	}
	assert.Equal(t, "0-499,502,504-999", s.encode())
	assert.Equal(t, 997, s.len())

	r := newDoneSet(1000)
	r.merge(s.encode())
	assert.Equal(t, s.encode(), r.encode())
	assert.Equal(t, 997, r.len())
	assert.True(t, r.has(0) && r.has(502) && r.has(999))
	assert.False(t, r.has(500) || r.has(503))

	r.merge("500-501,503")
	assert.Equal(t, 1000, r.len())
	assert.Equal(t, "0-999", r.encode())
}

func TestDoneSetIgnoresDamagedCheckpoints(t *testing.T) {
	t.Parallel()
	s := newDoneSet(10)
	s.merge("x,3-1,-4,5-,9-12,10,2-3,7")
	assert.Equal(t, "2-3,7", s.encode(), "only valid in-range ranges count")
}

// A checkpoint that does not fit the metadata budget leaves out its last
// ranges: it may under-report, never over-report.
func TestDoneSetEncodingStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	s := newDoneSet(100_000)
	for i := 0; i < 100_000; i += 2 {
		s.add(i)
	}
	text := s.encode()
	assert.LessOrEqual(t, len(text), maxCheckpointText)
	r := newDoneSet(100_000)
	r.merge(text)
	assert.Positive(t, r.len())
	for _, part := range strings.Split(text, ",") {
		assert.NotContains(t, part, "-", "every other item: no ranges")
	}
	for i := 1; i < 100_000; i += 2 {
		if r.has(i) {
			t.Fatalf("item %d was never done", i)
		}
	}
}
