package payload

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
)

// MaxCheckpointText bounds a checkpoint in a blob's metadata, which must fit
// with the other fields in the service's 8 KiB for all of a blob's metadata.
const MaxCheckpointText = 6000

// DoneSet is a batch's checkpoint: the items already completed, succeeded or
// poisoned on their own, which a redelivered batch skips. It is safe for
// concurrent use.
type DoneSet struct {
	mu    sync.Mutex
	words []uint64
	n     int // items in the batch
	count int
}

// NewDoneSet returns the empty checkpoint of a batch of n items.
func NewDoneSet(n int) *DoneSet { return &DoneSet{words: make([]uint64, (n+63)/64), n: n} }

// Add records item i, 0 to n−1, as done.
func (s *DoneSet) Add(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, b := i/64, uint64(1)<<(i%64)
	if s.words[w]&b == 0 {
		s.words[w] |= b
		s.count++
	}
}

// Has reports whether item i, 0 to n−1, is done.
func (s *DoneSet) Has(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.words[i/64]&(1<<(i%64)) != 0
}

// Len is how many items are done.
func (s *DoneSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Encode writes the set as ranges ("0-499,502,504-999"), at most
// MaxCheckpointText bytes. When the ranges do not fit, the last ones are
// left out: a checkpoint may under-report (those items run again, which
// at-least-once delivery allows) but never over-report.
func (s *DoneSet) Encode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for i := 0; i < s.n; {
		if s.words[i/64]&(1<<(i%64)) == 0 {
			// Jump over empty words quickly: most of a failing batch is done.
			if s.words[i/64]>>(i%64) == 0 {
				i = (i/64 + 1) * 64
			} else {
				i++
			}
			continue
		}
		j := i
		for j+1 < s.n && s.words[(j+1)/64]&(1<<((j+1)%64)) != 0 {
			j++
		}
		r := strconv.Itoa(i)
		if j > i {
			r += "-" + strconv.Itoa(j)
		}
		if b.Len()+len(r)+1 > MaxCheckpointText {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
		i = j + 1
	}
	return b.String()
}

// Merge adds the ranges of an encoded checkpoint. Ranges that do not parse
// or fall outside the batch are ignored: a damaged checkpoint only means
// items run again.
func (s *DoneSet) Merge(text string) {
	if text == "" {
		return
	}
	for _, r := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if isRange {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || z < a || z >= s.n {
			continue
		}
		s.addRange(a, z)
	}
}

// addRange marks items a to z, inclusive.
func (s *DoneSet) addRange(a, z int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := a; i <= z; i++ {
		w := i / 64
		// A whole word at once: a checkpoint is mostly long ranges.
		if i%64 == 0 && z-i >= 63 {
			s.count += 64 - bits.OnesCount64(s.words[w])
			s.words[w] = ^uint64(0)
			i += 63
			continue
		}
		if b := uint64(1) << (i % 64); s.words[w]&b == 0 {
			s.words[w] |= b
			s.count++
		}
	}
}
