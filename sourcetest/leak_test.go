package sourcetest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails a run whose tests pass but leave a goroutine running: every
// goroutine a test starts, or starts through the package, must have ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
