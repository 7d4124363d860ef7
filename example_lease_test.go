package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Among the processes that would distribute work, the one holding the lease
// runs; the others wait and take over when it exits or dies.
func ExampleLease() {
	account, err := azdispatch.NewAccountFromConnectionString(connectionString(), nil)
	if err != nil {
		panic(err)
	}
	lease, err := azdispatch.NewLease(account, fmt.Sprintf("distributor-%d", time.Now().UnixNano()), nil)
	if err != nil {
		panic(err)
	}
	err = lease.Run(context.Background(), func(ctx context.Context) error {
		// Only one process at a time gets here. ctx ends, with cause
		// azdispatch.ErrOwnershipLost, if the lease cannot be kept.
		fmt.Println("distributing")
		return nil // released on return
	})
	fmt.Println("done:", err)
	// Output:
	// distributing
	// done: <nil>
}
