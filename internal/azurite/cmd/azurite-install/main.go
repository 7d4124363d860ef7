// Command azurite-install installs the pinned Azurite into the cache dir the
// test harness uses, so that CI can install it once, up front, with its own
// log line, before the tests start.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	dir, err := azurite.Install(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "azurite-install:", err)
		os.Exit(1)
	}
	fmt.Printf("azurite ready in %s (%.1fs)\n", dir, time.Since(start).Seconds())
}
