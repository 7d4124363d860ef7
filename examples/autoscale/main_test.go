package main

import (
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the test binary play the worker, which run starts as a copy
// of the running executable. As the test, it fails a run whose tests pass
// but leave a goroutine running.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "worker" {
		os.Exit(worker())
	}
	goleak.VerifyTestMain(m)
}

// The example, smaller: the worker handles every order and scales back down.
func TestAutoscaleHandlesEveryOrder(t *testing.T) {
	if testing.Short() {
		if os.Getenv("AZDISPATCH_REQUIRE_AZURITE") != "" {
			t.Fatal("AZDISPATCH_REQUIRE_AZURITE is set: run without -short, with Azurite")
		}
		t.Skip("runs against Azurite (Node.js): run without -short")
	}
	// The test suite's account, if it names one; never the one a
	// developer keeps for real work in AZURE_STORAGE_CONNECTION_STRING.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", os.Getenv("AZDISPATCH_CONNECTION_STRING"))
	if err := run(100, io.Discard); err != nil {
		t.Fatal(err)
	}
}
