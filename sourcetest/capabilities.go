package sourcetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// Offered names the capabilities c offers: the fields of
// [azdispatch.Capabilities] that are set, in their order.
func Offered(c azdispatch.Capabilities) []string {
	var names []string
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		kind := f.Type.Kind()
		if f.IsExported() && (kind == reflect.Func || kind == reflect.Interface) && !v.Field(i).IsNil() {
			names = append(names, f.Name)
		}
	}
	return names
}

// capabilityTests check what a capability promises, for those a queue
// offers: one subtest each, skipped, and so named in a verbose run as not
// offered, for the others.
var capabilityTests = []struct {
	name  string
	has   func(c azdispatch.Capabilities) bool
	check func(t *testing.T, h Harness, q azdispatch.Shard, c azdispatch.Capabilities)
}{
	{"Peek", func(c azdispatch.Capabilities) bool { return c.Peek != nil }, checkPeek},
	{"PoisonQueue", func(c azdispatch.Capabilities) bool { return c.PoisonQueue != nil }, checkPoisonQueue},
	{"Create", func(c azdispatch.Capabilities) bool { return c.Create != nil }, checkCreate},
	{"Exists", func(c azdispatch.Capabilities) bool { return c.Exists != nil }, checkExists},
	{"Transactions", func(c azdispatch.Capabilities) bool { return c.Transactions != nil }, checkTransactions},
	{"ServiceTime", func(c azdispatch.Capabilities) bool { return c.ServiceTime != nil }, checkServiceTime},
	{"Pauser", func(c azdispatch.Capabilities) bool { return c.Pauser != nil }, checkPauser},
}

// testCapabilities logs what a queue of h offers beyond the Source and
// Target interfaces, and checks what each capability it offers promises.
func testCapabilities(t *testing.T, h Harness) {
	c := azdispatch.CapabilitiesOf(h.NewQueue(t))
	t.Logf("%s offers %v", h.Behaviour().Name, Offered(c))
	for _, ct := range capabilityTests {
		t.Run(ct.name, func(t *testing.T) {
			t.Parallel()
			q := h.NewQueue(t)
			c := azdispatch.CapabilitiesOf(q)
			if !ct.has(c) {
				t.Skipf("%s is not offered", ct.name)
			}
			ct.check(t, h, q, c)
		})
	}
}

// checkPeek checks that a peek shows a visible message as it was sent, and
// neither hides it nor counts a delivery.
func checkPeek(t *testing.T, _ Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	id := send(t, q, "peeked", nil)
	var seen []*azdispatch.Delivery
	require.Eventually(t, func() bool {
		var err error
		seen, err = c.Peek(context.Background(), azdispatch.MaxBatch)
		require.NoError(t, err)
		return len(seen) > 0
	}, patience, poll, "a peek sees the message sent")
	require.Len(t, seen, 1)
	assert.Equal(t, id, seen[0].ID)
	assert.Equal(t, "peeked", seen[0].Text)
	d := receiveOne(t, q, long)
	assert.Equal(t, id, d.ID, "a peek does not hide the message")
	assert.EqualValues(t, 1, d.DequeueCount, "a peek is no delivery")
}

// checkPoisonQueue checks that the poison queue is a queue of its own.
func checkPoisonQueue(t *testing.T, _ Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	p := c.PoisonQueue()
	if p == nil {
		t.Skip("the method is there, and says there is no poison queue")
	}
	assert.NotEqual(t, q.Name(), p.Name(), "the poison queue is another queue")
	id := send(t, p, "poisoned", nil)
	d := receiveOne(t, p, long)
	assert.Equal(t, id, d.ID)
	require.NoError(t, p.Delete(context.Background(), d))
}

// checkCreate checks that creating a queue succeeds, also when it exists.
func checkCreate(t *testing.T, _ Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	require.NoError(t, c.Create(context.Background()))
	require.NoError(t, c.Create(context.Background()), "the queue exists already")
	send(t, q, "created", nil)
}

// checkExists checks that a queue sent to exists.
func checkExists(t *testing.T, _ Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	send(t, q, "here", nil)
	exists, err := c.Exists(context.Background())
	require.NoError(t, err)
	assert.True(t, exists, "a queue sent to exists")
}

// checkTransactions checks that a send is counted.
func checkTransactions(t *testing.T, _ Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	before := c.Transactions().Send
	send(t, q, "counted", nil)
	assert.Greater(t, c.Transactions().Send, before, "a send is counted")
}

// checkServiceTime checks that the service's clock is near this machine's,
// within the backend's skew, once an answer has told it.
func checkServiceTime(t *testing.T, h Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	send(t, q, "what time is it", nil)
	assertNear(t, time.Now(), c.ServiceTime(), h.Behaviour().ClockSkew+time.Second, "ServiceTime")
}

// checkPauser checks that a pause is kept as given, lasts at least its
// duration, ends when its time is up on the backend's clock, and is ended
// by a resume.
func checkPauser(t *testing.T, h Harness, q azdispatch.Shard, c azdispatch.Capabilities) {
	ctx := context.Background()
	send(t, q, "the queue exists", nil)
	p := c.Pauser
	st, err := p.Pause(ctx, time.Hour, &azdispatch.PauseOptions{By: "ops: Zoë"})
	require.NoError(t, err)
	got, err := p.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, st, got, "a pause reads back as it was given")
	assert.Equal(t, "ops: Zoë", got.By)
	// At least the hour from now on the backend's clock, to the second
	// (Since is cut to it, and a client's knowledge of the service's time
	// may be a second behind): at most two more.
	assert.GreaterOrEqual(t, got.Until.Sub(got.Since), time.Hour)
	assert.LessOrEqual(t, got.Until.Sub(got.Since), time.Hour+3*time.Second)
	require.NoError(t, p.Resume(ctx))
	got, err = p.PauseState(ctx)
	require.NoError(t, err)
	assert.Zero(t, got, "a resumed queue is not paused")

	_, err = p.Pause(ctx, 2*time.Second, nil)
	require.NoError(t, err)
	h.Advance(t, q, 5*time.Second) // two seconds and up to three more
	got, err = p.PauseState(ctx)
	require.NoError(t, err)
	assert.Zero(t, got, "a pause ends when its time is up")
}
