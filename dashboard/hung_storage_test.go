package dashboard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// With storage that does not answer, every page answers within the
// readings' bound (5 s; the test allows 15), saying why, where it took
// 30 s.
func TestEveryPageAnswersSoonWhenStorageHangs(t *testing.T) {
	t.Parallel()
	var hang atomic.Bool
	q := memqueue.New("orders", &memqueue.Options{Intercept: func(ctx context.Context, _ string, _ azdispatch.Op) error {
		if hang.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}})
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	hang.Store(true)
	for _, page := range []string{"", "poison", "latency", "confirm?do=purge-all"} {
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, _, body := get(t, srv, page)
			took := time.Since(start)
			assert.Equal(t, 200, code)
			assert.Less(t, took, 15*time.Second, "bounded by the reading's deadline")
			assert.Contains(t, body, "no answer within 5 s")
		})
	}
}
