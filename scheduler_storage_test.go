package azdispatch

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/storagefault"
	"github.com/azdispatch/azdispatch/internal/timetable"
)

// occurrenceLog is a listener's record of the occurrences it handled.
type occurrenceLog struct {
	mu   sync.Mutex
	seen map[time.Time]int
}

func (o *occurrenceLog) handler(_ context.Context, m *Message[string]) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m.Occurrence != nil {
		o.seen[m.Occurrence.At]++
	}
	return nil
}

func (o *occurrenceLog) times() []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	ts := slices.Collect(func(yield func(time.Time) bool) {
		for at := range o.seen {
			if !yield(at) {
				return
			}
		}
	})
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

func (o *occurrenceLog) count(at time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[at]
}

// Three schedulers in one process race for one schedule against the
// emulator, each with its own account: every occurrence is handled
// exactly once, and no second goes by without one.
func TestSchedulersRacingAgainstTheEmulatorHandleEachOccurrenceOnce(t *testing.T) {
	long(t)
	t.Parallel()
	q := testQueue(t)
	occ := &occurrenceLog{seen: map[time.Time]int{}}
	l, err := NewListener(q, occ.handler, quick())
	require.NoError(t, err)
	started(t, l)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var schedulers []*Scheduler[string]
	var accounts []*Account
	for _, name := range []string{"a", "b", "c"} {
		a := testAccount(t, nil)
		sq, err := a.Queue(q.Name())
		require.NoError(t, err)
		pub, err := NewPublisher[string](sq, nil)
		require.NoError(t, err)
		s, err := NewScheduler(pub, &SchedulerOptions{Instance: name, ClaimTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		require.NoError(t, s.Add(Schedule[string]{Name: "tick", Every: time.Second, Messages: func(_ context.Context, o Occurrence) ([]string, error) {
			return []string{o.At.Format(time.RFC3339)}, nil
		}}))
		schedulers, accounts = append(schedulers, s), append(accounts, a)
		wg.Go(func() { assert.NoError(t, s.Run(ctx)) })
	}
	waitFor(t, "12 occurrences handled", func() bool { return len(occ.times()) >= 12 })
	cancel()
	wg.Wait()
	states, err := schedulers[0].States(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	last := states[0].Last
	waitFor(t, "the last occurrence handled", func() bool { return occ.count(last) == 1 })

	ts := occ.times()
	for i, at := range ts {
		assert.Equal(t, 1, occ.count(at), "occurrence %v", at)
		if i > 0 {
			assert.Equal(t, time.Second, at.Sub(ts[i-1]), "none missing before %v", at)
		}
	}
	var blob, send int64
	var each []int64
	for _, a := range accounts {
		tx := a.Transactions()
		blob, send = blob+tx.Blob(), send+tx.Send
		each = append(each, tx.Blob())
	}
	t.Logf("%d occurrences by 3 schedulers: %d sends, %d blob requests (%.1f per occurrence; by instance %v), %d duplicates dropped; the listener's marks: %d blob requests",
		len(ts), send, blob, float64(blob)/float64(len(ts)), each, l.State().Duplicates, q.account.Transactions().Blob())
	assert.EqualValues(t, len(ts), states[0].Sent)
}

// An occurrence sent twice (its first claimant hung past its claim, then
// sent anyway) is handled once against the emulator: the second message
// finds the first's mark and is deleted unhandled.
func TestADuplicateOfAnOccurrenceIsDroppedAgainstTheEmulator(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	occ := &occurrenceLog{seen: map[time.Time]int{}}
	l, err := NewListener(q, occ.handler, quick())
	require.NoError(t, err)
	started(t, l)
	pub, err := NewPublisher[string](q, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	var hungSends sync.WaitGroup
	hungSends.Add(1)
	messages := func(_ context.Context, o Occurrence) ([]string, error) { return []string{"report"}, nil }
	opts := &SchedulerOptions{ClaimTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	newScheduler := func(instance string, m func(context.Context, Occurrence) ([]string, error)) *Scheduler[string] {
		o := *opts
		o.Instance = instance
		s, err := NewScheduler(pub, &o)
		require.NoError(t, err)
		require.NoError(t, s.Add(Schedule[string]{Name: "report", Every: 5 * time.Second, Messages: m}))
		return s
	}
	var once sync.Once
	hung := newScheduler("hung", func(ctx context.Context, o Occurrence) ([]string, error) {
		once.Do(func() {
			defer hungSends.Done()
			<-release
		})
		return messages(ctx, o)
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// A wait below that fails must not leave the hung send holding Run.
	defer letGo()
	wg.Go(func() { assert.NoError(t, hung.Run(ctx)) })
	waitFor(t, "the hung scheduler's claim", func() bool {
		st, err := hung.States(ctx)
		return err == nil && len(st) == 1 && st[0].ClaimedBy == "hung"
	})
	healthy := newScheduler("healthy", messages)
	wg.Go(func() { assert.NoError(t, healthy.Run(ctx)) })
	waitFor(t, "the occurrence sent by the other", func() bool {
		st, err := healthy.States(ctx)
		return err == nil && len(st) == 1 && st[0].LastBy == "healthy" && len(occ.times()) == 1
	})
	first := occ.times()[0]
	// The hung one never got to send: half its claim timeout has passed,
	// so it looks again rather than send. Sent anyway, the copy would be
	// dropped: send one as it would have.
	letGo()
	hungSends.Wait()
	_, _, err = pub.publish(ctx, "report", hung.route(hung.schedules["report"], timetable.Occurrence{At: first}, 0))
	require.NoError(t, err)
	waitFor(t, "the copy dropped", func() bool { return l.State().Duplicates == 1 })
	assert.Equal(t, 1, occ.count(first), "handled once")
}

// Between occurrences a scheduler makes no request at all: three
// instances waiting an hour for an hourly schedule's next occurrence
// spend, in the seconds watched here, nothing.
func TestSchedulersWaitingForAnOccurrenceMakeNoRequest(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	far := func(after time.Time) time.Time { return after.Truncate(time.Second).Add(time.Hour) }
	var accounts []*Account
	var last *Scheduler[string]
	for _, name := range []string{"a", "b", "c"} {
		a := testAccount(t, nil)
		sq, err := a.Queue(q.Name())
		require.NoError(t, err)
		pub, err := NewPublisher[string](sq, nil)
		require.NoError(t, err)
		s, err := NewScheduler(pub, &SchedulerOptions{Instance: name, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		require.NoError(t, s.Add(Schedule[string]{Name: "hourly", Next: far, Messages: func(context.Context, Occurrence) ([]string, error) { return nil, nil }}))
		wg.Go(func() { assert.NoError(t, s.Run(ctx)) })
		accounts, last = append(accounts, a), s
	}
	total := func() int64 {
		var n int64
		for _, a := range accounts {
			n += a.Transactions().Total()
		}
		return n
	}
	waitFor(t, "every instance started", func() bool {
		// Each instance reads the record once it exists (one created it):
		// at least a read each, and a write.
		return total() >= 4
	})
	st, err := last.States(ctx)
	require.NoError(t, err)
	require.Len(t, st, 1)
	time.Sleep(time.Second) // any instance still starting is done by now
	before := total()
	time.Sleep(3 * time.Second)
	assert.Equal(t, before, total(), "no request while waiting for the next occurrence")
	t.Logf("starting cost %d requests for 3 instances; none while waiting", before)
}

// A scheduler over a sharded queue spreads an occurrence's messages over
// the shards; the listener of the set marks them in the set's payload
// store, and handles each message of each occurrence once, even when it
// was sent twice.
func TestASchedulerOverAShardedQueueAgainstTheEmulator(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	name := uniqueName(t)
	shards, err := AccountShards(name, 3, a)
	require.NoError(t, err)
	sq, err := NewShardedQueue(name, shards, nil)
	require.NoError(t, err)
	require.NoError(t, sq.Create(context.Background()))

	var mu sync.Mutex
	handled := map[string]int{}
	l, err := NewListener(sq, func(_ context.Context, m *Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		handled[m.Body]++
		return nil
	}, quick())
	require.NoError(t, err)
	started(t, l)
	pub, err := NewPublisher[string](sq, nil)
	require.NoError(t, err)
	s, err := NewScheduler(pub, &SchedulerOptions{Instance: "a", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	messages := func(_ context.Context, o Occurrence) ([]string, error) {
		var bodies []string
		for i := range 3 {
			bodies = append(bodies, fmt.Sprintf("%d/%d", o.At.Unix(), i))
		}
		return bodies, nil
	}
	require.NoError(t, s.Add(Schedule[string]{Name: "fan-out", Every: 2 * time.Second, Messages: messages}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	waitFor(t, "three occurrences' messages", func() bool { return count() >= 9 })
	cancel()
	require.NoError(t, <-done)
	states, err := s.States(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	last := states[0].Last

	// The last occurrence sent again, as an instance paused past its claim would.
	sc := s.schedules["fan-out"]
	for i := range 3 {
		_, _, err = pub.publish(context.Background(), fmt.Sprintf("%d/%d", last.Unix(), i), s.route(sc, timetable.Occurrence{At: last}, i))
		require.NoError(t, err)
	}
	waitFor(t, "the copies dropped", func() bool { return l.State().Duplicates == 3 })
	mu.Lock()
	defer mu.Unlock()
	for body, n := range handled {
		assert.Equal(t, 1, n, "message %s", body)
	}
	for i := range 3 {
		assert.Equal(t, 1, handled[fmt.Sprintf("%d/%d", last.Unix(), i)], "the last occurrence's message %d", i)
	}
}

// A scheduler is ready while it runs and its schedules' state can be read
// and written; one whose store keeps failing says so, for a readiness probe,
// and is ready again once the store answers. (It had no readiness: a
// scheduler whose store failed never showed on /readyz.)
func TestASchedulerWhoseStoreFailsIsNotReady(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	connectionString(t)
	blob, err := url.Parse(emulatorFor(t).BlobEndpoint())
	require.NoError(t, err)
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if down.Load() && req.URL.Host == blob.Host {
			return storagefault.ServiceError(req, http.StatusServiceUnavailable, "ServerBusy", nil)
		}
		return nil
	})
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	store, err := a.PayloadStore(uniqueName(t))
	require.NoError(t, err)
	p, err := NewPublisher[string](q, &PublisherOptions{Payloads: store})
	require.NoError(t, err)
	s, err := NewScheduler(p, &SchedulerOptions{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Add(Schedule[string]{Name: "tick", Every: time.Hour, Messages: func(context.Context, Occurrence) ([]string, error) { return nil, nil }}))
	require.ErrorIs(t, s.Ready(), ErrNotReady, "not running")

	down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	waitFor(t, "not ready while its store fails", func() bool {
		err := s.Ready()
		return err != nil && strings.Contains(err.Error(), "failed")
	})
	err = s.Ready()
	assert.ErrorIs(t, err, ErrNotReady)
	assert.Contains(t, err.Error(), `schedule "tick"`)
	assert.Contains(t, err.Error(), "ServerBusy")
	down.Store(false)
	waitFor(t, "ready again once the store answers", func() bool { return s.Ready() == nil })
}
