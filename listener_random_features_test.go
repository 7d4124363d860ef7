package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// The parts of TestEngineRandomized's rounds that need the queue's payload
// store: batches, claim checks, delays past the listener's hop, cancels
// racing delivery, unique sends and a schedule.

// features is what a round's publisher does besides plain sends, and the
// record of it. Its maps are guarded by the round's mu.
type features struct {
	batches, large, hops, cancelRace, unique, schedule bool
	keyed                                              keyed
	roundGroups
	// ttl is every send's: messages never expire in rounds whose clock
	// jumps days ahead, or a message waiting for its retry would expire
	// and be lost for a reason of the test's own.
	ttl time.Duration

	msgs      map[string]msgEntry // by message ID: the numbers it carries
	notSent   map[int]bool        // numbers of unique sends that lost the key (or failed)
	cancelled map[int]bool        // Cancel returned nil: no handler may run for them from then
	uncertain map[int]bool        // a cancel failed midway, or could not tell: delivery excused
	called    map[int]bool        // a handler ran for them
	due       map[int]time.Time   // of those sent for later: no handler may run for them before
	tokens    []cancellable       // sends not yet cancelled

	hopSent     int            // messages sent past the listener's hop
	cancels     int            // Cancel calls
	cancelledN  int            // of them, nil
	cancelOther map[string]int // the other outcomes of cancels, by error
	blobFaults  int            // faults armed on the payload store
	// leavers counts the armed faults that may leave a payload behind for
	// a sweep: failed blob deletes (of a settled message's payload), failed
	// blob writes (a poison mark, so a poisoned payload looks live), and
	// message deletes whose answers are lost.
	leavers       int
	itemsPoisoned int // batch items poisoned alone
	sendRetries   int // publisher sends that failed and were sent again
	uniqueGroups  int
	uniqueWins    int
	batchesSent   int
	largeSent     int

	sched *azdispatch.Scheduler[string]
	// occFirst is, by occurrence (its message's body: "s" and its time in
	// Unix seconds, or "n" for a run now), the message whose handler ran
	// for it first; occSettled, the occurrences handled or poisoned;
	// schedMessages, the messages of the schedule seen.
	occFirst      map[string]string
	occSettled    map[string]bool
	schedMessages map[string]bool
	// pauses are the schedule's pauses as the round made them (see
	// controlSchedule), and inPause, by pause, the occurrences of the
	// timetable handled whose time fell in it.
	pauses  []schedPause
	inPause map[int]map[string]bool
	runNows int // run nows asked
}

// schedPause is a pause of the round's schedule: occurrences after since
// and before until are missed, and by the default policy one catch-up,
// late, stands for them all.
type schedPause struct{ since, until time.Time }

// msgEntry is what one queue message carries: one number, or a batch's.
type msgEntry struct {
	ids   []int
	batch bool
}

// cancellable is a send that Cancel may be called for.
type cancellable struct {
	token string
	ids   []int
}

func newFeatures() features {
	return features{roundGroups: newRoundGroups(), msgs: map[string]msgEntry{}, notSent: map[int]bool{}, cancelled: map[int]bool{}, uncertain: map[int]bool{},
		called: map[int]bool{}, cancelOther: map[string]int{}, due: map[int]time.Time{}, occFirst: map[string]string{}, occSettled: map[string]bool{}, schedMessages: map[string]bool{}, inPause: map[int]map[string]bool{}}
}

// chooseFeatures draws the round's features. Delays past the hop and a
// schedule need the manual clock: a hop is days long, and a schedule's
// occurrences come with moves of the clock rather than with sleeps.
func (e *engineRound) chooseFeatures(r *rand.Rand) {
	f := &e.features
	f.batches = r.IntN(2) == 0
	f.large = r.IntN(2) == 0
	f.cancelRace = r.IntN(2) == 0
	f.unique = r.IntN(2) == 0
	f.groups = r.IntN(2) == 0
	if e.clock != nil {
		f.hops = r.IntN(2) == 0
		f.schedule = r.IntN(2) == 0
	}
	if f.hops {
		f.ttl = -1
	}
	e.chooseKeys(r)
}

func (f *features) describe() string {
	return fmt.Sprintf("batches %t, claim checks %t, hops %t, cancels %t, unique sends %t, schedule %t, groups %t, %s",
		f.batches, f.large, f.hops, f.cancelRace, f.unique, f.schedule, f.groups, f.keyed.describe())
}

func (f *features) summary() string {
	return fmt.Sprintf("%d batches (%d items poisoned alone), %d claim-checked, %d past the hop; %d cancels (%d nil, others %v; %d numbers uncertain); %d unique groups (%d won); %d schedule messages; %d groups (%d continued); %d blob faults armed; %d sends retried",
		f.batchesSent, f.itemsPoisoned, f.largeSent, f.hopSent, f.cancels, f.cancelledN, f.cancelOther, len(f.uncertain), f.uniqueGroups, f.uniqueWins, len(f.schedMessages), len(f.kids), len(f.contSettled), f.blobFaults, f.sendRetries) + f.keyed.summary()
}

// clockStep is how far a step moves the manual clock: seconds, and in
// rounds with delays past the hop, sometimes days.
func (e *engineRound) clockStep() time.Duration {
	if e.hops && e.r.IntN(4) == 0 {
		return time.Duration(1+e.r.IntN(3)) * 24 * time.Hour
	}
	return time.Duration(500+e.r.IntN(2500)) * time.Millisecond
}

// drainStep is how far the drain moves the manual clock each turn: far
// enough that a message due days ahead comes due within the drain.
func (e *engineRound) drainStep() time.Duration {
	if e.hopSent > 0 {
		return 12 * time.Hour
	}
	return 2 * time.Second
}

func (e *engineRound) newID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.sent
	e.sent++
	return id
}

func (e *engineRound) sentAs(msgID string, batch bool, ids ...int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.msgs[msgID] = msgEntry{ids: ids, batch: batch}
}

// sentFor records a publisher's send: its message, and when it is due.
func (e *engineRound) sentFor(s azdispatch.Sent, batch bool, ids ...int) {
	e.sentAs(s.ID, batch, ids...)
	e.mu.Lock()
	for _, n := range ids {
		e.due[n] = s.Due
	}
	e.mu.Unlock()
	e.cancellable(s, ids)
}

// now is the queues' time.
func (e *engineRound) now() time.Time {
	if e.clock != nil {
		return e.clock.Now()
	}
	return time.Now()
}

// violationf records the round's first violation. The caller holds mu.
func (e *engineRound) violationf(format string, args ...any) {
	if e.violation == "" {
		e.violation = fmt.Sprintf(format, args...)
	}
}

// owed says whether number n must be handled or poisoned by the round's
// end. The caller holds mu.
func (e *engineRound) owed(n int) bool { return !e.notSent[n] && !e.cancelled[n] && !e.uncertain[n] }

// bodyID reads the number a body carries: all of it, or what comes before
// a large body's padding.
func bodyID(body string) (int, error) {
	n, _, _ := strings.Cut(body, " ")
	return strconv.Atoi(n)
}

// singleOf is the number a message carries, if it carries one alone.
func (e *engineRound) singleOf(d *azdispatch.Delivery) (int, bool) {
	e.mu.Lock()
	ent, ok := e.msgs[d.ID]
	e.mu.Unlock()
	if ok {
		return ent.ids[0], !ent.batch
	}
	n, err := strconv.Atoi(d.Text)
	return n, err == nil
}

// handlerCalled notes a handler call for number n: none may come after
// Cancel returned nil for it. The caller holds mu.
func (e *engineRound) handlerCalled(n int, m *azdispatch.Message[string]) {
	e.called[n] = true
	if due, now := e.due[n], e.now(); now.Before(due) {
		e.violationf("message %d (%s, delivery %d): handled at %v, before it was due at %v", n, m.ID, m.DequeueCount, now, due)
	}
	if e.cancelled[n] {
		e.violationf("message %d (%s, delivery %d): the handler ran after Cancel returned nil for it", n, m.ID, m.DequeueCount)
	}
}

// poisonedAs records what a poison envelope stands for. The caller holds
// mu.
func (e *engineRound) poisonedAs(env *azdispatch.PoisonEnvelope) error {
	if occ, ok := occurrenceOf(env.Body); ok {
		e.occSettled[occ] = true
		e.schedMessages[env.MessageID] = true
		return nil
	}
	if _, body, err := azdispatch.ParseMetadata(env.Body); err != nil {
	} else if id, ok := continuationOf(body); ok { // its metadata carries its group's outcome
		e.contSettled[id] = true
		e.contMsgs[env.MessageID] = true
		return nil
	}
	if env.Batch == "" {
		// A whole message: its text may be a pointer or carry a due line.
		if ent, ok := e.msgs[env.MessageID]; ok {
			for _, n := range ent.ids {
				e.poisoned[n] = true
			}
			return nil
		}
	}
	// A batch item's body carries its batch's metadata (its key, say).
	_, body, err := azdispatch.ParseMetadata(env.Body)
	if err != nil {
		return fmt.Errorf("a poison envelope of %s with malformed metadata: %w", env.MessageID, err)
	}
	n, err := bodyID(body)
	if err != nil {
		return fmt.Errorf("a poison envelope of %s (batch %q item %d) the round cannot place: %w", env.MessageID, env.Batch, env.Item, err)
	}
	e.poisoned[n] = true
	if env.Batch != "" {
		e.itemsPoisoned++
	}
	return nil
}

// sendSome sends n plain messages, or, in rounds with the features, one
// batch, one claim-checked message, or one sent past the listener's hop,
// or one sent for later through the publisher, whose cancel may race its
// delivery.
func (e *engineRound) sendSome(t *testing.T, n int) {
	ctx := context.Background()
	if e.groups && e.r.IntN(5) == 0 {
		e.sendGroup(t)
		return
	}
	k := e.r.IntN(10)
	switch {
	case e.batches && k < 2:
		ids := make([]int, 1+e.r.IntN(8))
		items := make([]string, len(ids))
		for i := range ids {
			ids[i] = e.newID()
			items[i] = strconv.Itoa(ids[i])
		}
		opts := &azdispatch.SendOptions{TTL: e.ttl, Key: e.keyOf(), Delay: e.smallDelay()}
		s := e.publish(t, func() (azdispatch.Sent, error) { return e.pub.SendBatch(ctx, items, opts) })
		e.sentFor(s, true, ids...)
		e.mu.Lock()
		e.batchesSent++
		e.mu.Unlock()
	case e.large && k < 4:
		id := e.newID()
		// Past the queue's limit by up to a few KiB: offloaded whole.
		body := strconv.Itoa(id) + " " + strings.Repeat("x", azdispatch.MaxMessageSize+e.r.IntN(4096))
		opts := &azdispatch.SendOptions{TTL: e.ttl, Key: e.keyOf(), Delay: e.smallDelay()}
		s := e.publish(t, func() (azdispatch.Sent, error) { return e.pub.SendWith(ctx, body, opts) })
		e.sentFor(s, false, id)
		e.mu.Lock()
		e.largeSent++
		e.mu.Unlock()
	case e.hops && k < 6:
		id := e.newID()
		// Past the listener's hop of 7 days: received while the clock
		// moves towards its due time, and hidden again.
		opts := &azdispatch.SendOptions{TTL: e.ttl, Key: e.keyOf(), Delay: azdispatch.MaxVisibility + time.Duration(1+e.r.IntN(5*24*3600))*time.Second}
		s := e.publish(t, func() (azdispatch.Sent, error) { return e.pub.SendWith(ctx, strconv.Itoa(id), opts) })
		e.sentFor(s, false, id)
		e.mu.Lock()
		e.hopSent++
		e.mu.Unlock()
	case e.cancelRace && k < 8:
		id := e.newID()
		opts := &azdispatch.SendOptions{TTL: e.ttl, Key: e.keyOf(), Delay: e.smallDelay()}
		s := e.publish(t, func() (azdispatch.Sent, error) { return e.pub.SendWith(ctx, strconv.Itoa(id), opts) })
		e.sentFor(s, false, id)
	case e.keyed.on && k < 9:
		for range n {
			id := e.newID()
			opts := &azdispatch.SendOptions{TTL: e.ttl, Key: e.keyOf()}
			s := e.publish(t, func() (azdispatch.Sent, error) { return e.pub.SendWith(ctx, strconv.Itoa(id), opts) })
			e.sentFor(s, false, id)
		}
	default:
		e.send(t, n)
	}
}

// smallDelay is a delay of a few seconds, or none: none for a push-only
// listener on the real clock, which a delayed message would not wake
// when it comes due (a move of the manual clock wakes it).
func (e *engineRound) smallDelay() time.Duration {
	if e.r.IntN(2) == 0 || e.opts.Scaling.PushOnly && e.clock == nil {
		return 0
	}
	return time.Duration(1+e.r.IntN(3)) * time.Second
}

// publish sends through the round's publisher, again while storage
// faults make it fail: a send that failed sent nothing (no fault is armed
// on the queue's sends), though its blob may be left for a sweep.
func (e *engineRound) publish(t *testing.T, send func() (azdispatch.Sent, error)) azdispatch.Sent {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := send()
		if err == nil {
			return s
		}
		var se *azdispatch.StorageError
		if !errors.As(err, &se) && !errors.Is(err, azdispatch.ErrNoHealthyShard) || time.Now().After(deadline) {
			require.NoError(t, err, "a publisher's send")
		}
		e.mu.Lock()
		e.sendRetries++
		e.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// cancellable keeps a send's token for a cancel to come, in rounds that
// cancel; a third of them are cancelled at once, racing the first
// delivery.
func (e *engineRound) cancellable(s azdispatch.Sent, ids []int) {
	if !e.cancelRace || s.Token == "" {
		return
	}
	e.mu.Lock()
	e.tokens = append(e.tokens, cancellable{token: s.Token, ids: ids})
	e.mu.Unlock()
	if e.r.IntN(3) == 0 {
		e.cancelOne(len(e.tokens) - 1)
	}
}

// blobFault arms a failed or lost request on a payload store, in rounds
// that use one.
func (e *engineRound) blobFault() {
	if !e.batches && !e.large && !e.hops && !e.cancelRace && !e.unique && !e.schedule && !e.groups && !e.keyed.leases() {
		return
	}
	ops := []azdispatch.Op{memqueue.OpBlobRead, memqueue.OpBlobWrite, memqueue.OpBlobDelete}
	if e.keyed.leases() {
		ops = append(ops, memqueue.OpBlobLease)
	}
	op := ops[e.r.IntN(len(ops))]
	n := 1 + e.r.IntN(2)
	lose := e.r.IntN(3) == 0
	if lose {
		e.queue().LoseNext(op, 1)
	} else {
		e.queue().FailNext(op, n, nil)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.blobFaults++
	if !lose && op != memqueue.OpBlobRead && op != memqueue.OpBlobLease {
		e.leavers += n
	}
}

// cancelSome cancels a send from a goroutine of its own, after a random
// wait, racing the listener's delivery of it. A cancel that fails is
// tried again, as its documentation says it may be.
func (e *engineRound) cancelSome() {
	e.mu.Lock()
	n := len(e.tokens)
	e.mu.Unlock()
	if n > 0 {
		e.cancelOne(e.r.IntN(n))
	}
}

// cancelOne cancels the send of tokens[i], as cancelSome says.
func (e *engineRound) cancelOne(i int) {
	e.mu.Lock()
	c := e.tokens[i]
	e.tokens = append(e.tokens[:i], e.tokens[i+1:]...)
	e.cancels++
	e.mu.Unlock()
	wait := time.Duration(e.r.IntN(40)) * time.Millisecond
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		time.Sleep(wait)
		failed := false
		outcome := func(f func()) {
			e.mu.Lock()
			defer e.mu.Unlock()
			f()
		}
		// Within the minute waitCancels gives the cancels under way.
		ctx, stop := context.WithTimeout(context.Background(), 45*time.Second)
		defer stop()
		for range 10 {
			err := e.pub.Cancel(ctx, c.token)
			if err != nil && ctx.Err() != nil {
				outcome(func() { e.violationf("a cancel of %v still under way 45 s after it began: %v", c.ids, err) })
				return
			}
			if err != nil {
				outcome(func() { e.cancelOther[cancelOutcome(err)]++ })
			}
			switch {
			case err == nil:
				outcome(func() {
					e.cancelledN++
					for _, n := range c.ids {
						if e.called[n] {
							e.violationf("message %d: Cancel returned nil after a handler had run for it", n)
						}
						e.cancelled[n] = true
					}
				})
				return
			case errors.Is(err, azdispatch.ErrAlreadyDelivered) && !failed:
				return // delivered: it must be handled or poisoned
			case errors.Is(err, azdispatch.ErrAlreadyDelivered), errors.Is(err, azdispatch.ErrAlreadyCancelled),
				errors.Is(err, azdispatch.ErrCancelUndetermined):
				// After a failed try, or when the service cannot tell:
				// cancelled or delivered, either may be.
				outcome(func() {
					for _, n := range c.ids {
						e.uncertain[n] = true
					}
				})
				return
			}
			var se *azdispatch.StorageError
			if !errors.As(err, &se) {
				outcome(func() { e.violationf("Cancel failed with an error that is not storage's: %v", err) })
				return
			}
			failed = true
			time.Sleep(20 * time.Millisecond)
		}
		outcome(func() {
			for _, n := range c.ids {
				e.uncertain[n] = true
			}
		})
	}()
}

// waitCancels waits for the cancels under way. A cancel that finds the
// record of an earlier try of its own pending waits until the record is
// 10 s old on the service's clock, so a manual clock is moved meanwhile,
// as the service's would move.
func (e *engineRound) waitCancels(t *testing.T) {
	done := make(chan struct{})
	go func() { // ends when the cancels have, which the round waits for below
		e.bg.Wait()
		close(done)
	}()
	deadline := time.After(time.Minute)
	for {
		select {
		case <-done:
			return
		case <-deadline:
			<-done // each cancel's context ends within a minute
			t.Fatalf("cancels still under way a minute after the last step")
		case <-time.After(50 * time.Millisecond):
			if e.clock != nil {
				e.epoch.Add(1)
				e.clock.Advance(2 * time.Second)
			}
		}
	}
}

// cancelOutcome names a cancel's error, for the round's summary.
func cancelOutcome(err error) string {
	for _, s := range []error{azdispatch.ErrAlreadyDelivered, azdispatch.ErrAlreadyCancelled, azdispatch.ErrCancelUndetermined} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "storage"
}

// sendUnique sends messages under one new unique key from several
// goroutines at once: one send at most may win the key, and the others
// fail with ErrDuplicate, or with a storage error of their own.
func (e *engineRound) sendUnique(t *testing.T) {
	if !e.unique {
		return
	}
	e.mu.Lock()
	key := fmt.Sprintf("key-%d-%d", e.round, e.uniqueGroups)
	e.uniqueGroups++
	e.mu.Unlock()
	ids := make([]int, 2+e.r.IntN(3))
	for i := range ids {
		ids[i] = e.newID()
	}
	sents := make([]azdispatch.Sent, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			sents[i], errs[i] = e.pub.SendWith(context.Background(), strconv.Itoa(id),
				&azdispatch.SendOptions{UniqueKey: key, UniqueFor: time.Hour, TTL: e.ttl})
		})
	}
	wg.Wait()
	wins, other := 0, 0
	e.mu.Lock()
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
			e.msgs[sents[i].ID] = msgEntry{ids: []int{ids[i]}}
			continue
		case errors.Is(err, azdispatch.ErrDuplicate):
		case errors.As(err, new(*azdispatch.StorageError)), errors.Is(err, azdispatch.ErrNoHealthyShard):
			other++
		default:
			e.violationf("unique key %s: a send failed with %v, neither ErrDuplicate nor storage's", key, err)
		}
		e.notSent[ids[i]] = true
	}
	e.uniqueWins += wins
	if wins > 1 {
		e.violationf("unique key %s: %d of %d sends at once succeeded in one window", key, wins, len(ids))
	}
	if wins == 0 && other == 0 {
		e.violationf("unique key %s: every send failed with ErrDuplicate, and none won the key", key)
	}
	e.mu.Unlock()
	for i, err := range errs {
		if err == nil {
			e.cancellable(sents[i], ids[i:i+1])
		}
	}
}

// startScheduler runs a schedule over the round's publisher, in rounds
// that have one, until the function it returns is called.
func (e *engineRound) startScheduler(t *testing.T) (stop func() error) {
	if !e.schedule {
		return func() error { return nil }
	}
	s, err := azdispatch.NewScheduler(e.pub, &azdispatch.SchedulerOptions{Instance: "engine", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Add(azdispatch.Schedule[string]{
		Name:  "tick",
		Every: time.Duration(1+e.r.IntN(3)) * time.Second,
		Messages: func(_ context.Context, o azdispatch.Occurrence) ([]string, error) {
			kind := "s"
			if o.RunNow {
				kind = "n"
			}
			return []string{kind + strconv.FormatInt(o.At.Unix(), 10)}, nil
		},
	}))
	e.sched = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var runErr error
	return func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
}

// occurrenceOf reads a schedule's message body, which names its
// occurrence: "s" and its time, or "n" and the time of a run now.
func occurrenceOf(body string) (string, bool) {
	if len(body) < 2 || body[0] != 's' && body[0] != 'n' {
		return "", false
	}
	_, err := strconv.ParseInt(body[1:], 10, 64)
	return body, err == nil
}

// controlSchedule pauses the round's schedule for a few seconds, resumes
// it, or asks for a run now, at random. A pause is recorded once made, and
// shortened before its resume or when another replaces it, so that no
// occurrence is judged by a pause longer than the one it met.
func (e *engineRound) controlSchedule() {
	if e.sched == nil {
		return
	}
	ctx := context.Background()
	switch e.r.IntN(3) {
	case 0:
		d := time.Duration(1+e.r.IntN(8)) * time.Second
		st, err := e.sched.Pause(ctx, "tick", d, nil)
		if err == nil {
			e.mu.Lock()
			// A pause replaces one that still holds: that one held
			// until this one began.
			if n := len(e.pauses); n > 0 && st.Paused.Since.Before(e.pauses[n-1].until) {
				e.pauses[n-1].until = st.Paused.Since
			}
			e.pauses = append(e.pauses, schedPause{since: st.Paused.Since, until: st.Paused.Until})
			e.mu.Unlock()
		}
	case 1:
		e.mu.Lock()
		if n := len(e.pauses); n > 0 && e.now().Before(e.pauses[n-1].until) {
			e.pauses[n-1].until = e.now()
		}
		e.mu.Unlock()
		_, _ = e.sched.Resume(ctx, "tick") // may meet a blob fault
	default:
		if _, err := e.sched.RunNow(ctx, "tick"); err == nil {
			e.mu.Lock()
			e.runNows++
			e.mu.Unlock()
		}
	}
}

// checkPaused checks an occurrence of the timetable handled against the
// pauses: one whose time fell in a pause is late, and is the only one of
// that pause. The caller holds mu.
func (e *engineRound) checkPaused(m *azdispatch.Message[string], occ string) {
	o := m.Occurrence
	if o.RunNow {
		return
	}
	for i, p := range e.pauses {
		if !o.At.After(p.since) || !o.At.Before(p.until) {
			continue
		}
		if !o.Late {
			e.violationf("occurrence %v fell in the pause from %v to %v, and was handled on time", o.At, p.since, p.until)
		}
		if e.inPause[i] == nil {
			e.inPause[i] = map[string]bool{}
		}
		if e.inPause[i][occ] = true; len(e.inPause[i]) > 1 {
			e.violationf("occurrences %v fell in the pause from %v to %v and were handled: one catch-up stands for them all", e.inPause[i], p.since, p.until)
		}
	}
}

// handleOccurrence handles a schedule's message: the handler may run for
// one message of each occurrence only (the listener drops the others).
func (e *engineRound) handleOccurrence(ctx context.Context, m *azdispatch.Message[string]) error {
	at := m.Occurrence.At.Unix()
	occ := m.Body
	e.mu.Lock()
	e.schedMessages[m.ID] = true
	if first, ok := e.occFirst[occ]; !ok {
		e.occFirst[occ] = m.ID
	} else if first != m.ID {
		e.violationf("occurrence %s: the handler ran for message %s after it ran for message %s of the same occurrence",
			occ, m.ID, first)
	}
	e.checkPaused(m, occ)
	e.running++
	e.mostRun = max(e.mostRun, e.running)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running--
		e.mu.Unlock()
	}()
	err := e.behave(ctx, int(at), m.DequeueCount)
	if err == nil {
		e.mu.Lock()
		e.occSettled[occ] = true
		e.mu.Unlock()
	}
	return err
}

// checkFeaturesEnd asserts, once Run has returned and the queues are
// empty, what the features promise: every occurrence the schedule's
// record counts as sent was handled or poisoned, and the payload stores
// hold no payload of a settled message but those kept for the poison
// queue, unless a fault may have left one for a sweep.
func (e *engineRound) checkFeaturesEnd(t *testing.T, s azdispatch.State) {
	ctx := context.Background()
	if e.sched != nil {
		var states []azdispatch.ScheduleState
		var err error
		for range 5 { // a blob fault armed in the steps may be left
			if states, err = e.sched.States(ctx); err == nil {
				break
			}
		}
		require.NoError(t, err, "the schedule's state")
		e.mu.Lock()
		settled := int64(len(e.occSettled))
		e.mu.Unlock()
		for _, st := range states {
			e.mu.Lock()
			t.Logf("schedule %s: %d occurrences sent (%d run nows asked), %d skipped; %d pauses; %d handled or poisoned; %d duplicates dropped",
				st.Name, st.Sent, e.runNows, st.Skipped, len(e.pauses), settled, s.Duplicates)
			e.mu.Unlock()
			require.GreaterOrEqual(t, settled, st.Sent, "occurrences handled or poisoned, against those the schedule's record says were sent")
			if !st.Last.IsZero() {
				e.mu.Lock()
				last := e.occSettled["s"+strconv.FormatInt(st.Last.Unix(), 10)]
				e.mu.Unlock()
				require.True(t, last, "the last occurrence sent, %v, handled or poisoned", st.Last)
			}
		}
	}
	left, poisonedKept := 0, 0
	seen := map[*azdispatch.PayloadStore]bool{}
	for _, q := range e.queues {
		store := q.PayloadStore()
		if seen[store] {
			continue
		}
		seen[store] = true
		var res azdispatch.SweepResult
		var err error
		for range 5 {
			if res, err = azdispatch.Sweep(ctx, store, &azdispatch.SweepOptions{DryRun: true}); err == nil {
				break
			}
		}
		require.NoError(t, err, "a dry sweep of the payload store")
		// Records (of cancels, keys, deliveries and the schedule) live
		// on by design; payloads kept for poison are marked.
		left += res.Deleted + res.Live - res.Records
		poisonedKept += res.Poisoned
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Logf("payloads left: %d, kept for poison: %d; state: %d rehidden, %d cancelled, %d duplicates", left, poisonedKept, s.Rehidden, s.Cancelled, s.Duplicates)
	// Each fault that may leave a payload leaves one at most; so does a
	// send that failed after its blob was written.
	require.LessOrEqual(t, left, e.leavers+e.sendRetries, "payloads of settled messages left in the store, past the faults that may leave one (%d failed blob writes and deletes or lost message deletes, %d sends retried)",
		e.leavers, e.sendRetries)
}
