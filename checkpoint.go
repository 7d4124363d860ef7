package azdispatch

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
)

// maxCheckpointText bounds a checkpoint in a blob's metadata, which must fit
// with the other fields in the service's 8 KiB for all of a blob's metadata.
const maxCheckpointText = 6000

// doneSet is a batch's checkpoint (seed 004's LastCompletedStep): the items
// already completed, succeeded or poisoned on their own, which a redelivered
// batch skips. It is safe for concurrent use.
type doneSet struct {
	mu    sync.Mutex
	words []uint64
	n     int // items in the batch
	count int
}

func newDoneSet(n int) *doneSet { return &doneSet{words: make([]uint64, (n+63)/64), n: n} }

// add records item i as done.
func (s *doneSet) add(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, b := i/64, uint64(1)<<(i%64)
	if s.words[w]&b == 0 {
		s.words[w] |= b
		s.count++
	}
}

func (s *doneSet) has(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.words[i/64]&(1<<(i%64)) != 0
}

// len is how many items are done.
func (s *doneSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// encode writes the set as ranges ("0-499,502,504-999"), at most
// maxCheckpointText bytes. When the ranges do not fit, the last ones are left
// out: a checkpoint may under-report (those items run again, which
// at-least-once allows) but never over-report.
func (s *doneSet) encode() string {
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
		if b.Len()+len(r)+1 > maxCheckpointText {
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

// merge adds the ranges of an encoded checkpoint. Ranges that do not parse or
// fall outside the batch are ignored: a damaged checkpoint only means items
// run again.
func (s *doneSet) merge(text string) {
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
func (s *doneSet) addRange(a, z int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := a; i <= z; i++ {
		w := i / 64
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
