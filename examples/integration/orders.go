// Package orders is a worker service's code, as a user of azdispatch would
// write it, in a module of its own: the integration test beside it runs it
// against Azurite through the azuritetest package.
package orders

import (
	"context"

	"github.com/azdispatch/azdispatch"
)

// Order is what the service's queue carries.
type Order struct {
	ID   int    `json:"id"`
	Note string `json:"note,omitempty"`
}

// Ship is the service's handler: here it only reports the order it was
// given.
func Ship(shipped chan<- Order) azdispatch.Handler[Order] {
	return func(ctx context.Context, m *azdispatch.Message[Order]) error {
		select {
		case shipped <- m.Body:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
