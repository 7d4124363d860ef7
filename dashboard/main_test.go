package dashboard_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails a run whose tests pass but leave a goroutine running: every
// job a test starts must have ended by its Handler's Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
