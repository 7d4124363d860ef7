package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// The groups of TestEngineRandomized's rounds: in about half of them, some
// sends are a group of 1 to 70 children (past one shard of the group's
// records at times) under ContinueOnFinish, whose continuation the round's
// own listener handles, every child leaving its number as its result. The
// round checks that a continuation's handler runs for one message of its
// group at most (a copy is dropped), never before every child's handler
// call ended once (or it was poisoned), with an outcome that counts every child, and with
// results that are the children's own; and, at the end, that every
// group's continuation was handled or poisoned.

// roundGroups is what a round did with groups. Its maps are guarded by the
// round's mu.
type roundGroups struct {
	groups      bool
	kids        map[string][]int  // by group: its children's numbers, by index
	ended       map[int]bool      // numbers whose handler call ended once (failed or not), or copied to the poison queue
	contFirst   map[string]string // by group: the message its continuation's handler ran for first
	contSettled map[string]bool   // groups whose continuation was handled or poisoned
	contMsgs    map[string]bool   // the continuations' messages seen
	started     int
}

func newRoundGroups() roundGroups {
	return roundGroups{kids: map[string][]int{}, ended: map[int]bool{}, contFirst: map[string]string{},
		contSettled: map[string]bool{}, contMsgs: map[string]bool{}}
}

// continuationPrefix starts a continuation's body: "group:" and its group.
const continuationPrefix = "group:"

// continuationOf reads a continuation's body.
func continuationOf(body string) (string, bool) {
	return strings.CutPrefix(body, continuationPrefix)
}

// sendGroup starts a group and sends its children, through the round's
// publisher, again while storage faults make a request fail.
func (e *engineRound) sendGroup(t *testing.T) {
	ctx := context.Background()
	e.mu.Lock()
	id := fmt.Sprintf("r%d-%d", e.round, e.started)
	e.started++
	e.mu.Unlock()
	size := 1 + e.r.IntN(70)
	then, err := azdispatch.ContinueWith(e.pub, continuationPrefix+id)
	require.NoError(t, err)
	store := e.target.(azdispatch.PayloadStorer).PayloadStore()
	var g *azdispatch.Group
	deadline := time.Now().Add(10 * time.Second)
	for g == nil {
		g, err = store.StartGroup(ctx, size, then, &azdispatch.GroupOptions{ID: id, Rule: azdispatch.ContinueOnFinish})
		var se *azdispatch.StorageError
		if err != nil && (!errors.As(err, &se) || time.Now().After(deadline)) {
			require.NoError(t, err, "start a group")
		}
	}
	kids := make([]int, size)
	for i := range kids {
		kids[i] = e.newID()
	}
	e.mu.Lock()
	e.kids[id] = kids
	e.mu.Unlock()
	for i, n := range kids {
		opts := &azdispatch.SendOptions{TTL: e.ttl, Group: g.Child(i)}
		s := e.publish(t, func() (azdispatch.Sent, error) { return e.pub.SendWith(ctx, strconv.Itoa(n), opts) })
		e.sentAs(s.ID, false, n) // never cancelled: its group would wait for it
	}
}

// handleContinuation handles a group's continuation.
func (e *engineRound) handleContinuation(ctx context.Context, m *azdispatch.Message[string], id string) error {
	e.mu.Lock()
	e.contMsgs[m.ID] = true
	if first, ok := e.contFirst[id]; !ok {
		e.contFirst[id] = m.ID
	} else if first != m.ID {
		e.violationf("group %s: the continuation's handler ran for message %s after it ran for message %s", id, m.ID, first)
	}
	kids := e.kids[id]
	o, ok := azdispatch.GroupOutcomeOf(m.MessageInfo)
	switch {
	case !ok || o.ID != id:
		e.violationf("group %s: its continuation %s carries no outcome of it: %+v", id, m.ID, o)
	case o.Size != len(kids) || o.Succeeded+o.Failed != len(kids):
		e.violationf("group %s of %d children: its outcome counts %d succeeded and %d failed of %d", id, len(kids), o.Succeeded, o.Failed, o.Size)
	}
	for _, n := range kids {
		if !e.ended[n] {
			e.violationf("group %s: its continuation's handler ran before child %d's handler had ended once, or it was poisoned", id, n)
		}
	}
	e.running++
	e.mostRun = max(e.mostRun, e.running)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running--
		e.mu.Unlock()
	}()
	results, err := e.target.(azdispatch.PayloadStorer).PayloadStore().GroupResults(ctx, id)
	if err != nil {
		return err // a blob fault: tried again
	}
	e.mu.Lock()
	for i, r := range results {
		if i < 0 || i >= len(kids) || string(r) != strconv.Itoa(kids[i]) {
			e.violationf("group %s: child %d's result %q is not its number", id, i, r)
		}
	}
	e.mu.Unlock()
	err = e.behave(ctx, -len(kids), m.DequeueCount)
	if err == nil {
		e.mu.Lock()
		e.contSettled[id] = true
		e.mu.Unlock()
	}
	return err
}

// groupsUnsettled counts the groups whose continuation was neither handled
// nor poisoned. The caller holds mu.
func (e *engineRound) groupsUnsettled() int {
	n := 0
	for id := range e.kids {
		if !e.contSettled[id] {
			n++
		}
	}
	return n
}
