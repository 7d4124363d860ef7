package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A report every day at 03:00, sent by a scheduler that every instance of
// a service runs, and handled once per occurrence. Over memqueue, a test
// moves the queue's clock and sees three days in milliseconds.
func ExampleScheduler() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := memqueue.NewManualClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("reports", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	if err != nil {
		panic(err)
	}
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "web-1"})
	if err != nil {
		panic(err)
	}
	err = s.Add(azdispatch.Schedule[string]{
		Name: "daily-report",
		Cron: "0 3 * * *", // in UTC; set Location for another time zone
		Messages: func(_ context.Context, o azdispatch.Occurrence) ([]string, error) {
			return []string{"report for " + o.At.AddDate(0, 0, -1).Format(time.DateOnly)}, nil
		},
	})
	if err != nil {
		panic(err)
	}

	handled := make(chan string, 8)
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		o := m.Occurrence
		handled <- fmt.Sprintf("%s (occurrence %s, late %v, standing for %d missed)", m.Body, o.At.Format(time.DateTime), o.Late, o.Missed)
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 10*time.Millisecond)}})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 2)
	go func() { done <- l.Run(ctx) }()
	go func() { done <- s.Run(ctx) }()

	for range 3 {
		next := waitForNext(ctx, s, clock)
		clock.Advance(next.Sub(clock.Now())) // to 03:00
		fmt.Println(<-handled)
	}
	// The clock jumps two days and six hours, as if no instance ran: one
	// late catch-up stands for the three occurrences missed.
	next := waitForNext(ctx, s, clock)
	clock.Advance(next.Sub(clock.Now()) + 54*time.Hour)
	fmt.Println(<-handled)
	waitForNext(ctx, s, clock)
	states, err := s.States(ctx)
	if err != nil {
		panic(err)
	}
	st := states[0]
	fmt.Printf("%s: %s, sent %d, last by %s, next %s\n", st.Name, st.Spec, st.Sent, st.LastBy, st.Next.Format(time.DateTime))
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			panic(err)
		}
	}
	// Output:
	// report for 2026-05-01 (occurrence 2026-05-02 03:00:00, late false, standing for 0 missed)
	// report for 2026-05-02 (occurrence 2026-05-03 03:00:00, late false, standing for 0 missed)
	// report for 2026-05-03 (occurrence 2026-05-04 03:00:00, late false, standing for 0 missed)
	// report for 2026-05-06 (occurrence 2026-05-07 03:00:00, late true, standing for 2 missed)
	// daily-report: cron 0 3 * * * UTC, sent 4, last by web-1, next 2026-05-08 03:00:00
}

// waitForNext waits until the scheduler's next occurrence is ahead of the
// clock (it is asleep until then), and returns it.
func waitForNext(ctx context.Context, s *azdispatch.Scheduler[string], clock *memqueue.ManualClock) time.Time {
	for {
		states, err := s.States(ctx)
		if err == nil && len(states) == 1 && states[0].ClaimedBy == "" && states[0].Next.After(clock.Now()) {
			return states[0].Next
		}
		time.Sleep(time.Millisecond)
	}
}
