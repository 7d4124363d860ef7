package payload

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDoneSetEncodesRangesAndMerges(t *testing.T) {
	t.Parallel()
	s := NewDoneSet(1000)
	for i := range 500 {
		s.Add(i)
	}
	s.Add(502)
	for i := 504; i < 1000; i++ {
		s.Add(i)
	}
	assert.Equal(t, "0-499,502,504-999", s.Encode())
	assert.Equal(t, 997, s.Len())

	r := NewDoneSet(1000)
	r.Merge(s.Encode())
	assert.Equal(t, s.Encode(), r.Encode())
	assert.Equal(t, 997, r.Len())
	assert.True(t, r.Has(0) && r.Has(502) && r.Has(999))
	assert.False(t, r.Has(500) || r.Has(503))

	r.Merge("500-501,503")
	assert.Equal(t, 1000, r.Len())
	assert.Equal(t, "0-999", r.Encode())
}

func TestDoneSetIgnoresDamagedCheckpoints(t *testing.T) {
	t.Parallel()
	s := NewDoneSet(10)
	s.Merge("x,3-1,-4,5-,9-12,10,2-3,7")
	assert.Equal(t, "2-3,7", s.Encode(), "only valid in-range ranges count")
}

// A checkpoint that does not fit the metadata budget leaves out its last
// ranges: it may under-report, never over-report.
func TestDoneSetEncodingStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	s := NewDoneSet(100_000)
	for i := 0; i < 100_000; i += 2 {
		s.Add(i)
	}
	text := s.Encode()
	assert.LessOrEqual(t, len(text), MaxCheckpointText)
	r := NewDoneSet(100_000)
	r.Merge(text)
	assert.Positive(t, r.Len())
	for _, part := range strings.Split(text, ",") {
		assert.NotContains(t, part, "-", "every other item: no ranges")
	}
	for i := 1; i < 100_000; i += 2 {
		if r.Has(i) {
			t.Fatalf("item %d was never done", i)
		}
	}
}

func TestDoneSetIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	s := NewDoneSet(1000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < 1000; i += 4 {
				s.Add(i)
				s.Has(i)
				s.Len()
			}
		})
	}
	wg.Go(func() { s.Merge("0-999") })
	wg.Go(func() { _ = s.Encode() })
	wg.Wait()
	assert.Equal(t, 1000, s.Len())
	assert.Equal(t, "0-999", s.Encode())
}
