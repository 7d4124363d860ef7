package keyorder

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is what a key's order needs to know: for each publisher of the
// key, the highest number done, and, while the key is stuck, the lowest
// predecessor a message of it has waited for and since when (by the
// service's clock). It is kept in the metadata of the key's lease blob, one
// entry per publisher.
type State struct {
	pubs map[string]pubState
}

// pubState is one publisher's part of a key's order.
type pubState struct {
	done uint64
	// low is the lowest predecessor a message has waited for since the
	// key got stuck at since; 0 while it is not stuck.
	low   uint64
	since time.Time
	// touched orders the publishers for forgetting: the oldest go first.
	touched time.Time
	// handled are the numbers of the last messages handled (not given up
	// as poison, nor skipped as a gap), most recent last: a copy of one
	// delivered again (its delete failed, its handler returned after its
	// timeout, the record's answer was lost) is known for what it is.
	handled []uint64
}

// keepHandled bounds pubState.handled: the copies to recognise are of the
// last few messages of a key, within a visibility timeout or two.
const keepHandled = 8

// maxPubs bounds the publishers a key's state keeps (a publisher is a
// process's Publisher: each restart is a new one). Those not heard of
// longest are forgotten first; a message of a forgotten publisher waits
// for its predecessor as for one that never comes.
const maxPubs = 32

// entryPrefix marks a publisher's entry among the blob's metadata; the
// other entries are kept as they are.
const entryPrefix = "o_"

// Load reads the state from a lease blob's metadata.
func Load(meta map[string]string) State {
	s := State{pubs: map[string]pubState{}}
	for k, v := range meta {
		pub, ok := strings.CutPrefix(k, entryPrefix)
		if !ok || !validPub(pub) {
			continue
		}
		if p, ok := parseEntry(v); ok {
			s.pubs[pub] = p
		}
	}
	return s
}

// parseEntry reads "done.low.since.touched", times in Unix seconds, and
// after them ".h1-h2-…", the numbers handled, if any.
func parseEntry(v string) (pubState, bool) {
	f := strings.Split(v, ".")
	var handled []uint64
	if len(f) == 5 {
		for _, s := range strings.Split(f[4], "-") {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return pubState{}, false
			}
			handled = append(handled, n)
		}
		handled = handled[max(0, len(handled)-keepHandled):]
		f = f[:4]
	}
	if len(f) != 4 {
		return pubState{}, false
	}
	var n [4]int64
	for i, s := range f {
		var err error
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil || n[i] < 0 {
			return pubState{}, false
		}
	}
	p := pubState{done: uint64(n[0]), low: uint64(n[1]), touched: time.Unix(n[3], 0), handled: handled}
	if p.low != 0 {
		p.since = time.Unix(n[2], 0)
	}
	return p, true
}

// Meta is the state written over meta, a lease blob's metadata: its other
// entries as they are, and the publishers' most recently touched maxPubs.
func (s State) Meta(meta map[string]string) map[string]string {
	out := make(map[string]string, len(meta)+len(s.pubs))
	for k, v := range meta {
		if !strings.HasPrefix(k, entryPrefix) {
			out[k] = v
		}
	}
	pubs := make([]string, 0, len(s.pubs))
	for pub := range s.pubs {
		pubs = append(pubs, pub)
	}
	slices.SortFunc(pubs, func(a, b string) int { return s.pubs[b].touched.Compare(s.pubs[a].touched) })
	for _, pub := range pubs[:min(len(pubs), maxPubs)] {
		p := s.pubs[pub]
		var since int64
		if p.low != 0 {
			since = p.since.Unix()
		}
		v := strconv.FormatUint(p.done, 10) + "." + strconv.FormatUint(p.low, 10) + "." +
			strconv.FormatInt(max(since, 0), 10) + "." + strconv.FormatInt(max(p.touched.Unix(), 0), 10)
		sep := "."
		for _, n := range p.handled {
			v += sep + strconv.FormatUint(n, 10)
			sep = "-"
		}
		out[entryPrefix+pub] = v
	}
	return out
}

// Verdict is what a message may do now, and what its judging changed.
type Verdict struct {
	// Run: the message it follows is done, or it follows none, or it was
	// given up: the message runs.
	Run bool
	// Changed: the state changed (the key got stuck, a lower predecessor
	// is missing, or a gap was given up): write it.
	Changed bool
	// GaveUp: the key had been stuck for the whole wait, and what was
	// missing below the lowest predecessor waited for was given up; the
	// message may still have to wait, for a later one.
	GaveUp bool
}

// Judge says whether the message stamped st may run at now (the service's
// clock). A key stuck for wait gives up the messages missing below the
// lowest predecessor waited for: a message waiting for that one runs then,
// and the others wait for it as before (the wait counting afresh).
func (s *State) Judge(st Stamp, now time.Time, wait time.Duration) Verdict {
	if s.pubs == nil {
		s.pubs = map[string]pubState{}
	}
	p := s.pubs[st.Pub]
	if st.Prev == 0 || p.done >= st.Prev {
		return Verdict{Run: true}
	}
	v := Verdict{Changed: true}
	switch {
	case p.low == 0:
		p.low, p.since = st.Prev, now
	case !now.Before(p.since.Add(wait)):
		p.done, p.low, p.since = max(p.done, min(p.low, st.Prev)), 0, time.Time{}
		v.GaveUp = true
		if v.Run = p.done >= st.Prev; !v.Run {
			p.low, p.since = st.Prev, now // stuck again, from now
		}
	case st.Prev < p.low:
		p.low = st.Prev
	default:
		return Verdict{}
	}
	p.touched = now
	s.pubs[st.Pub] = p
	return v
}

// Handled reports whether the message stamped st was handled already: a
// copy of it delivered again is not to run after the messages that follow
// it. (A message given up as poison or skipped as a gap is not: a copy of
// it, requeued or late, runs.)
func (s *State) Handled(st Stamp) bool {
	return slices.Contains(s.pubs[st.Pub].handled, st.N)
}

// Done records that the message stamped st is done, handled or given up as
// poison: the key's messages that follow it may run.
func (s *State) Done(st Stamp, now time.Time, handled bool) {
	if s.pubs == nil {
		s.pubs = map[string]pubState{}
	}
	p := s.pubs[st.Pub]
	if handled && !slices.Contains(p.handled, st.N) {
		h := append(slices.Clone(p.handled), st.N)
		p.handled = h[max(0, len(h)-keepHandled):]
	}
	p.done, p.touched = max(p.done, st.N), now
	if p.low != 0 && p.low <= p.done {
		p.low, p.since = 0, time.Time{}
	}
	s.pubs[st.Pub] = p
}
