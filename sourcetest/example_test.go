package sourcetest_test

import (
	"fmt"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// Offered tells which optional methods a source has: here memqueue's, and
// those of a wrapper that passes on only its Source and Target methods,
// which hides all of them.
func ExampleOffered() {
	q := memqueue.New("orders", nil)
	fmt.Println(sourcetest.Offered(azdispatch.CapabilitiesOf(q)))

	type wrapper struct{ azdispatch.Shard }
	fmt.Println(sourcetest.Offered(azdispatch.CapabilitiesOf(wrapper{q})))
	// Output:
	// [Peek PoisonQueue PayloadStore Subscribe Transactions ServiceTime Pauser]
	// []
}
