package azdispatch_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// envRunNowQueue, set to a queue's name, makes this test binary, run as
// TestRunNowProcess, one of the processes that
// TestRunNowFromTwoProcessesAtOnceSendsOneOccurrence races.
const envRunNowQueue = "AZDISPATCH_TEST_RUN_NOW_QUEUE"

// farOff is a schedule whose one occurrence lies past any test: only a
// run-now sends.
var farOff = azdispatch.Schedule[string]{Name: "nightly", Messages: echo, Next: func(after time.Time) time.Time {
	if at := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC); after.Before(at) {
		return at
	}
	return time.Time{}
}}

// runNowScheduler runs a scheduler of farOff on queue of the account
// connStr names, until the returned stop.
func runNowScheduler(t *testing.T, connStr, queue, instance string) (*azdispatch.Scheduler[string], func()) {
	t.Helper()
	account, err := azdispatch.NewAccountFromConnectionString(connStr, nil)
	require.NoError(t, err)
	q, err := account.Queue(queue)
	require.NoError(t, err)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: instance, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Add(farOff))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, s.Run(ctx)) })
	return s, func() {
		cancel()
		wg.Wait()
	}
}

// TestRunNowProcess is one of the racing processes of the test below, when
// it runs this binary with envRunNowQueue set; otherwise it does nothing.
// It runs a scheduler of the schedule, says "ready", asks for a run-now at
// the line "go" on stdin, says when the run it got was asked, and stops
// at the end of stdin.
func TestRunNowProcess(t *testing.T) {
	queue := os.Getenv(envRunNowQueue)
	if queue == "" {
		return // not a process started by the test below
	}
	s, stop := runNowScheduler(t, os.Getenv(envConnectionString), queue, "child-"+strconv.Itoa(os.Getpid()))
	defer stop()
	stdin := bufio.NewReader(os.Stdin)
	fmt.Println("child: ready: yes")
	_, err := stdin.ReadString('\n')
	require.NoError(t, err)
	st, err := s.RunNow(context.Background(), farOff.Name)
	require.NoError(t, err)
	asked := st.RunNow
	if asked.IsZero() {
		asked = st.LastRunNow // one just sent
	}
	fmt.Printf("child: asked: %d\n", asked.Unix())
	_, _ = io.Copy(io.Discard, stdin)
}

// Two processes, each running a scheduler of the schedule, ask for a
// run-now at the same moment: the schedule's listener handles one
// occurrence (or, should one of them be held up for more than ten
// seconds, one for each distinct run they were told of), and each once.
func TestRunNowFromTwoProcessesAtOnceSendsOneOccurrence(t *testing.T) {
	t.Parallel()
	connStr := azdispatch.EmulatorConnectionString(t)
	account, err := azdispatch.NewAccountFromConnectionString(connStr, nil)
	require.NoError(t, err)
	queue := fmt.Sprintf("run-now-%d", time.Now().UnixNano())
	q, err := account.Queue(queue)
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))

	var mu sync.Mutex
	handled := map[int64]int{}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Occurrence != nil && m.Occurrence.RunNow {
			handled[m.Occurrence.At.Unix()]++
		}
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, l.Run(ctx)) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	// The schedule's state, made by a scheduler first, as a deployment
	// would have it.
	s, stop := runNowScheduler(t, connStr, queue, "parent")
	defer stop()
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1
	}, time.Minute, 50*time.Millisecond, "the schedule's state")

	children := []*childProc{
		startChild(t, "process 1", "TestRunNowProcess", envRunNowQueue+"="+queue, envConnectionString+"="+connStr),
		startChild(t, "process 2", "TestRunNowProcess", envRunNowQueue+"="+queue, envConnectionString+"="+connStr),
	}
	for _, c := range children {
		c.expect(t, "ready")
	}
	for _, c := range children {
		_, err := io.WriteString(c.stdin, "go\n")
		require.NoError(t, err)
	}
	runs := map[int64]bool{}
	for _, c := range children {
		at, err := strconv.ParseInt(c.expect(t, "asked"), 10, 64)
		require.NoError(t, err)
		runs[at] = true
	}
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1 && states[0].RunNow.IsZero() && l.State().InFlight == 0 && depthOf(t, q) == 0
	}, time.Minute, 50*time.Millisecond, "no run-now waiting, and all handled")
	for _, c := range children {
		require.NoError(t, c.stdin.Close())
		require.NoError(t, c.wait(), c.who)
	}

	mu.Lock()
	defer mu.Unlock()
	want := map[int64]int{}
	for at := range runs {
		want[at] = 1
	}
	assert.Equal(t, want, handled, "one occurrence for each run the processes were told of, handled once")
	if len(runs) > 1 {
		t.Logf("the processes were told of %d runs: one asked more than ten seconds after the other", len(runs))
	}
	t.Logf("run-nows asked by 2 processes at once: %d occurrence(s) handled, %d duplicate message(s) dropped", len(handled), l.State().Duplicates)
}

// depthOf is q's approximate message count, or -1 if it cannot be read.
func depthOf(t *testing.T, q *azdispatch.Queue) int {
	n, err := q.Depth(context.Background())
	if err != nil {
		t.Logf("depth: %v", err)
		return -1
	}
	return n
}
