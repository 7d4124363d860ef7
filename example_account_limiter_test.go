package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch"
)

// A process that drives one storage account hard paces itself to the
// account's target instead of finding it through 503 ServerBusy answers.
// Here the pace is 50 requests per second, with a burst of 5 (a tenth of a
// second's worth), so a create and 20 sends take at least 0.3 s.
func ExampleAccountOptions_limiter() {
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(connectionString(),
		&azdispatch.AccountOptions{Limiter: rate.NewLimiter(50, 5)})
	if err != nil {
		panic(err)
	}
	queue, err := account.Queue(fmt.Sprintf("paced-%d", time.Now().UnixNano()))
	if err != nil {
		panic(err)
	}
	start := time.Now()
	if err := queue.Create(ctx); err != nil {
		panic(err)
	}
	for range 20 {
		if _, err := queue.Send(ctx, "paced", nil); err != nil {
			panic(err)
		}
	}
	fmt.Println("21 requests, at least 0.3 s:", time.Since(start) >= 300*time.Millisecond)
	// Output:
	// 21 requests, at least 0.3 s: true
}
