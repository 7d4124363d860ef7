package azuritetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails a run whose tests pass but leave a goroutine running: a
// Server's goroutines end when it is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
