package syncx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Callers within one second share a context; it keeps the base's values,
// ends Timeout to a second more after it was handed out, and Stop ends
// the current one at once.
func TestDeadlinesShareOneContextASecond(t *testing.T) {
	type key struct{}
	d := &Deadlines{Base: context.WithValue(context.Background(), key{}, "v"), Timeout: time.Minute}
	a, b := d.Get(), d.Get()
	assert.Equal(t, a, b, "one context for calls within a second")
	assert.Equal(t, "v", a.Value(key{}))
	deadline, ok := a.Deadline()
	assert.True(t, ok)
	assert.WithinRange(t, deadline, time.Now().Add(time.Minute-time.Second), time.Now().Add(time.Minute+time.Second))
	d.Stop()
	assert.Error(t, a.Err(), "stopped")
}
