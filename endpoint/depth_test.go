package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/storagefault"
	"github.com/azdispatch/azdispatch/memqueue"
)

// kedaValueLocation is what the README's first ScaledObject gives KEDA's
// metrics-api scaler as valueLocation; kedaDesiredLocation is the one of
// the README's latency-target ScaledObject, and kedaAgeLocation the
// alternative it names in a comment.
const (
	kedaValueLocation   = "depth"
	kedaDesiredLocation = "desired_workers"
	kedaAgeLocation     = "oldest_age_s"
)

// gjsonNumber reads the number at path in body the way KEDA's metrics-api
// scaler does for the simple paths it documents: a GJSON path of dotted
// keys, with array elements by index ("foo.0.bar"). Like the scaler, it
// fails unless the value there is a JSON number.
func gjsonNumber(body []byte, path string) (float64, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return 0, false
	}
	for _, key := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[key]
			if !ok {
				return 0, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				return 0, false
			}
			v = node[i]
		default:
			return 0, false
		}
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func TestDepthGJSONLookupReadsDottedPaths(t *testing.T) {
	t.Parallel()
	body := []byte(`{"foo":{"bar":42},"list":[{"x":1},{"x":2.5}],"s":"7","nil":null}`)
	tests := []struct {
		path string
		want float64
		ok   bool
	}{
		{"foo.bar", 42, true},
		{"list.1.x", 2.5, true},
		{"list.2.x", 0, false},
		{"s", 0, false}, // a string is not a number to the scaler
		{"nil", 0, false},
		{"foo", 0, false},
		{"missing", 0, false},
	}
	for _, tt := range tests {
		got, ok := gjsonNumber(body, tt.path)
		assert.Equal(t, tt.ok, ok, tt.path)
		assert.Equal(t, tt.want, got, tt.path)
	}
}

// get GETs h and returns the status and body.
func get(t testing.TB, h http.Handler) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/depth", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	}
	return rec.Code, rec.Body.Bytes()
}

// depthTransactions sums the Get Queue Properties requests made on the
// shards' queues.
func depthTransactions(sq *azdispatch.ShardedQueue) (n int64) {
	for _, sh := range sq.Shards() {
		n += sh.(*azdispatch.Queue).Transactions().Depth
	}
	return n
}

// peekTransactions sums the Peek Messages requests (counted as Other)
// made on the shards' queues.
func peekTransactions(sq *azdispatch.ShardedQueue) (n int64) {
	for _, sh := range sq.Shards() {
		n += sh.(*azdispatch.Queue).Transactions().Other
	}
	return n
}

// The depth endpoint sums every shard of a sharded queue spread over two
// accounts (two Azurite processes), and KEDA's metrics-api scaler finds the
// sum at the README's valueLocation. Readings are cached: a second request
// within CacheFor costs no request.
func TestDepthHandlerSumsEveryShardAcrossAccounts(t *testing.T) {
	t.Parallel()
	accts := []*azdispatch.Account{account(t, 0, nil), account(t, 1, nil)}
	base := uniqueName(t)
	for i := range 4 { // AccountShards names shard i base-i, and puts it in account i % 2
		newQueue(t, accts[i%2], i%2, fmt.Sprintf("%s-%d", base, i))
	}
	shards, err := azdispatch.AccountShards(base, 4, accts...)
	require.NoError(t, err)
	sq, err := azdispatch.NewShardedQueue("tasks", shards, nil)
	require.NoError(t, err)
	ctx := context.Background()
	want := 0
	for i, sh := range sq.Shards() {
		require.Same(t, accts[i%len(accts)], sh.(*azdispatch.Queue).Account(), "shards alternate between the accounts")
		for range i + 1 { // 1, 2, 3, 4 messages: every shard counts
			_, err := sh.Send(ctx, "work", nil)
			require.NoError(t, err)
			want++
		}
	}

	h, err := NewDepthHandler(sq, nil)
	require.NoError(t, err)
	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	t.Logf("served: %s", body)

	got, ok := gjsonNumber(body, kedaValueLocation)
	require.True(t, ok, "KEDA finds a number at valueLocation %q", kedaValueLocation)
	assert.Equal(t, float64(want), got)
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	assert.Equal(t, "tasks", rep.Queue)
	assert.False(t, rep.At.IsZero())
	assert.Empty(t, rep.Error)
	require.Len(t, rep.Shards, 4)
	for i, s := range rep.Shards {
		assert.Equal(t, sq.Shards()[i].Name(), s.Name)
		assert.Equal(t, accts[i%2].Name(), s.Account)
		require.NotNil(t, s.Depth)
		assert.Equal(t, i+1, *s.Depth)
		n, ok := gjsonNumber(body, "shards."+strconv.Itoa(i)+".depth")
		assert.True(t, ok)
		assert.Equal(t, float64(i+1), n)
	}
	assert.EqualValues(t, 4, depthTransactions(sq), "one Get Queue Properties per shard")

	// More work arrives; within CacheFor the endpoint serves the same
	// reading, without a request.
	_, err = sq.Shards()[1].Send(ctx, "more", nil)
	require.NoError(t, err)
	_, again := get(t, h)
	assert.Equal(t, body, again)
	assert.EqualValues(t, 4, depthTransactions(sq), "a cached reading costs nothing")

	// Without a cache, the next request reads again.
	fresh, err := NewDepthHandler(sq, &DepthOptions{CacheFor: -1})
	require.NoError(t, err)
	_, body = get(t, fresh)
	got, _ = gjsonNumber(body, kedaValueLocation)
	assert.Equal(t, float64(want+1), got)
	assert.EqualValues(t, 8, depthTransactions(sq))
}

// A shard that cannot be read fails the whole reading: 503, no depth at all
// (KEDA reports a failed scrape rather than scaling in on a partial sum),
// the shard's error in its entry. The failure is cached like a reading.
func TestDepthHandlerFailsRatherThanServeAPartialSum(t *testing.T) {
	t.Parallel()
	good := testQueue(t)
	send(t, good, 3, "work")
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if req.Method == http.MethodGet && req.URL.Query().Get("comp") == "metadata" {
			return storagefault.ServiceError(req, http.StatusInternalServerError, "OperationTimedOut", nil)
		}
		return nil
	})
	bad, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	sq, err := azdispatch.NewShardedQueue("tasks", []azdispatch.Shard{good, bad}, nil)
	require.NoError(t, err)

	h, err := NewDepthHandler(sq, nil)
	require.NoError(t, err)
	code, body := get(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	t.Logf("served: %s", body)
	_, ok := gjsonNumber(body, kedaValueLocation)
	assert.False(t, ok, "no number where KEDA looks")
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	assert.Nil(t, rep.Depth)
	assert.Contains(t, rep.Error, "1 of 2 shards")
	require.Len(t, rep.Shards, 2)
	require.NotNil(t, rep.Shards[0].Depth)
	assert.Equal(t, 3, *rep.Shards[0].Depth, "the healthy shard's depth is shown")
	assert.Nil(t, rep.Shards[1].Depth)
	assert.Contains(t, rep.Shards[1].Error, "OperationTimedOut")

	before := bad.Transactions().Depth
	code, _ = get(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, before, bad.Transactions().Depth, "a failure is cached too")
}

// Requests at the same moment share one reading; a plain Queue is served as
// one shard; other methods are refused.
func TestDepthHandlerSharesOneReadingAndServesAQueue(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	send(t, q, 5, "work")
	h, err := NewDepthHandler(q, &DepthOptions{CacheFor: -1})
	require.NoError(t, err)
	var wg sync.WaitGroup
	bodies := make([][]byte, 16)
	for i := range bodies {
		wg.Go(func() {
			code, body := get(t, h)
			assert.Equal(t, http.StatusOK, code)
			bodies[i] = body
		})
	}
	wg.Wait()
	for _, b := range bodies {
		n, ok := gjsonNumber(b, kedaValueLocation)
		assert.True(t, ok)
		assert.Equal(t, float64(5), n)
	}
	assert.LessOrEqual(t, q.Transactions().Depth, int64(len(bodies)), "never more than one reading per request")
	t.Logf("%d concurrent requests made %d readings", len(bodies), q.Transactions().Depth)
	var rep depthReport
	require.NoError(t, json.Unmarshal(bodies[0], &rep))
	assert.Equal(t, q.Name(), rep.Queue)
	require.Len(t, rep.Shards, 1)
	assert.Equal(t, q.Name(), rep.Shards[0].Name)
	assert.Equal(t, q.Account().Name(), rep.Shards[0].Account)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))

	_, err = NewDepthHandler(nil, nil)
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	_, err = NewDepthHandler(q, &DepthOptions{Timeout: -1})
	assert.ErrorContains(t, err, "DepthOptions.Timeout")
}

// The age of the oldest message is read in the same reading as the depth,
// one peek per shard, across both accounts: the answer carries the
// greatest age, KEDA finds it at the README's alternative valueLocation,
// and a cached reading costs no peek. With NoAge there is no age and no
// peek.
func TestDepthHandlerServesTheOldestAge(t *testing.T) {
	t.Parallel()
	accts := []*azdispatch.Account{account(t, 0, nil), account(t, 1, nil)}
	base := uniqueName(t)
	for i := range 2 { // shard i in account i
		newQueue(t, accts[i], i, fmt.Sprintf("%s-%d", base, i))
	}
	shards, err := azdispatch.AccountShards(base, 2, accts...)
	require.NoError(t, err)
	sq, err := azdispatch.NewShardedQueue("tasks", shards, nil)
	require.NoError(t, err)
	ctx := context.Background()
	old, young := sq.Shards()[0], sq.Shards()[1]
	_, err = old.Send(ctx, "old", nil)
	require.NoError(t, err)
	// The service stamps times to the second: after 2 s the old message
	// is at least 1 s old by its clock, however the seconds fall.
	time.Sleep(2*time.Second + 100*time.Millisecond)
	_, err = young.Send(ctx, "young", nil)
	require.NoError(t, err)

	h, err := NewDepthHandler(sq, nil)
	require.NoError(t, err)
	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	t.Logf("served: %s", body)
	age, ok := gjsonNumber(body, kedaAgeLocation)
	require.True(t, ok, "KEDA finds a number at valueLocation %q", kedaAgeLocation)
	assert.GreaterOrEqual(t, age, 1.0)
	assert.Equal(t, age, math.Trunc(age), "the service's clock counts whole seconds")
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	require.NotNil(t, rep.Depth)
	assert.Equal(t, 2, *rep.Depth)
	assert.Nil(t, rep.DesiredWorkers, "no desired workers unless asked for")
	require.Len(t, rep.Shards, 2)
	for _, s := range rep.Shards {
		require.NotNil(t, s.OldestAge, s.Name)
		assert.LessOrEqual(t, *s.OldestAge, age, "the answer is the greatest of the shards' ages")
	}
	assert.Equal(t, age, *rep.Shards[0].OldestAge, "the older message is on shard 0")
	assert.EqualValues(t, 2, peekTransactions(sq), "one peek per shard")
	assert.EqualValues(t, 2, depthTransactions(sq), "one Get Queue Properties per shard")

	_, again := get(t, h)
	assert.Equal(t, body, again)
	assert.EqualValues(t, 2, peekTransactions(sq), "a cached reading costs no peek")
	assert.EqualValues(t, 2, depthTransactions(sq))

	plain, err := NewDepthHandler(sq, &DepthOptions{NoAge: true})
	require.NoError(t, err)
	code, body = get(t, plain)
	require.Equal(t, http.StatusOK, code, string(body))
	_, ok = gjsonNumber(body, kedaAgeLocation)
	assert.False(t, ok, "no age with NoAge")
	assert.NotContains(t, string(body), "oldest_age_s")
	assert.EqualValues(t, 2, peekTransactions(sq), "NoAge saves the peek")
	assert.EqualValues(t, 4, depthTransactions(sq), "its own reading, depth alone")
}

// With a latency target, desired_workers is the depth over what the
// workers clear within it, rounded up, and 0 for an empty queue; KEDA
// finds it at the README's valueLocation.
func TestDepthHandlerServesDesiredWorkers(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	// 0.001 messages a second per worker, within an hour: 3.6 messages
	// per worker. An hour is far above any age the messages reach in a
	// test, so the late factor stays out of it.
	opts := &DepthOptions{CacheFor: -1, TargetWait: time.Hour, WorkerRate: 0.001}
	h, err := NewDepthHandler(q, opts)
	require.NoError(t, err)

	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	n, ok := gjsonNumber(body, kedaDesiredLocation)
	require.True(t, ok, "KEDA finds a number at valueLocation %q: %s", kedaDesiredLocation, body)
	assert.Zero(t, n, "an empty queue wants no worker, so KEDA may scale to zero")

	send(t, q, 7, "work")
	code, body = get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	t.Logf("served: %s", body)
	n, ok = gjsonNumber(body, kedaDesiredLocation)
	require.True(t, ok)
	assert.Equal(t, 2.0, n, "ceil(7 / 3.6)")
	depth, _ := gjsonNumber(body, kedaValueLocation)
	assert.Equal(t, 7.0, depth)
	assert.EqualValues(t, 2, q.Transactions().Other, "one peek per reading")
}

// A shard whose peek fails fails the whole reading, as a failed depth
// does: 503, no depth, no age, no desired workers; the shard shows the
// depth it did read and the peek's error.
func TestDepthHandlerFailsWhenAPeekFails(t *testing.T) {
	t.Parallel()
	good := testQueue(t)
	send(t, good, 2, "work")
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if req.Method == http.MethodGet && req.URL.Query().Get("peekonly") == "true" {
			return storagefault.ServiceError(req, http.StatusInternalServerError, "OperationTimedOut", nil)
		}
		return nil
	})
	name := uniqueName(t)
	newQueue(t, account(t, 0, nil), 0, name)
	bad, err := a.Queue(name)
	require.NoError(t, err)
	send(t, bad, 1, "work")
	sq, err := azdispatch.NewShardedQueue("tasks", []azdispatch.Shard{good, bad}, nil)
	require.NoError(t, err)

	h, err := NewDepthHandler(sq, &DepthOptions{TargetWait: time.Minute, WorkerRate: 1})
	require.NoError(t, err)
	code, body := get(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	t.Logf("served: %s", body)
	for _, loc := range []string{kedaValueLocation, kedaAgeLocation, kedaDesiredLocation} {
		_, ok := gjsonNumber(body, loc)
		assert.False(t, ok, "no number at %q", loc)
	}
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	assert.Contains(t, rep.Error, "1 of 2 shards")
	require.Len(t, rep.Shards, 2)
	assert.NotNil(t, rep.Shards[0].OldestAge, "the healthy shard's age is shown")
	assert.Empty(t, rep.Shards[0].Error)
	require.NotNil(t, rep.Shards[1].Depth, "the failing shard's depth was read")
	assert.Equal(t, 1, *rep.Shards[1].Depth)
	assert.Nil(t, rep.Shards[1].OldestAge)
	assert.Contains(t, rep.Shards[1].Error, "oldest age")
	assert.Contains(t, rep.Shards[1].Error, "OperationTimedOut")

	before := bad.Transactions().Other
	code, _ = get(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, before, bad.Transactions().Other, "a failure is cached too")
}

// onlySource is a Source with none of a queue's other methods: it cannot
// peek.
type onlySource struct{ azdispatch.Source }

func TestDepthOptionsAreChecked(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	tests := []struct {
		name  string
		src   azdispatch.Source
		opts  DepthOptions
		field string // "" for valid options
	}{
		{"defaults", q, DepthOptions{}, ""},
		{"target", q, DepthOptions{TargetWait: time.Minute, WorkerRate: 2.5}, ""},
		{"target without the age", q, DepthOptions{TargetWait: time.Minute, WorkerRate: 2.5, NoAge: true}, ""},
		{"negative timeout", q, DepthOptions{Timeout: -1}, "DepthOptions.Timeout"},
		{"target wait alone", q, DepthOptions{TargetWait: time.Minute}, "DepthOptions.WorkerRate"},
		{"worker rate alone", q, DepthOptions{WorkerRate: 1}, "DepthOptions.TargetWait"},
		{"negative target wait", q, DepthOptions{TargetWait: -time.Second, WorkerRate: 1}, "DepthOptions.TargetWait"},
		{"negative worker rate", q, DepthOptions{TargetWait: time.Minute, WorkerRate: -1}, "DepthOptions.WorkerRate"},
		{"NaN worker rate", q, DepthOptions{TargetWait: time.Minute, WorkerRate: math.NaN()}, "DepthOptions.WorkerRate"},
		{"infinite worker rate", q, DepthOptions{TargetWait: time.Minute, WorkerRate: math.Inf(1)}, "DepthOptions.WorkerRate"},
		{"a source that cannot peek", onlySource{q}, DepthOptions{}, "DepthOptions.NoAge"},
		{"a source that cannot peek, without the age", onlySource{q}, DepthOptions{NoAge: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDepthHandler(tt.src, &tt.opts)
			if tt.field == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
			var ce *azdispatch.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.field, ce.Field, err.Error())
		})
	}
}

func TestDesiredWorkers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		depth       int
		age, target time.Duration
		rate        float64
		want        int
	}{
		{"empty", 0, time.Hour, time.Minute, 1, 0},
		{"one message, fast workers", 1, 0, time.Minute, 100, 1},
		{"exact quotient", 10, 0, 100 * time.Second, 0.1, 1},
		{"rounded up", 31, 0, 20 * time.Second, 0.5, 4},
		{"under the target", 30, 19 * time.Second, 20 * time.Second, 0.5, 3},
		{"at the target", 30, 20 * time.Second, 20 * time.Second, 0.5, 3},
		{"just late: one more", 30, 21 * time.Second, 20 * time.Second, 0.5, 4},
		{"half late again", 30, 30 * time.Second, 20 * time.Second, 0.5, 5},
		{"twice late", 30, 40 * time.Second, 20 * time.Second, 0.5, 6},
		{"far late: at most doubled", 30, time.Hour, 20 * time.Second, 0.5, 6},
		{"tiny rate", math.MaxInt, 0, time.Second, 1e-300, math.MaxInt32},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, desiredWorkers(tt.depth, tt.age, tt.target, tt.rate), tt.name)
	}
}

// On in-memory queues with a manual clock, the age and the late factor
// are exact: the greatest age over the shards, desired workers doubled at
// most; a shard whose peek fails fails the reading.
func TestDepthHandlerAgeOnMemoryQueues(t *testing.T) {
	t.Parallel()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var failPeeks bool
	var mu sync.Mutex
	a := memqueue.New("tasks-0", &memqueue.Options{Clock: clock})
	b := memqueue.New("tasks-1", &memqueue.Options{Clock: clock, Intercept: func(_ context.Context, _ string, op azdispatch.Op) error {
		mu.Lock()
		defer mu.Unlock()
		// Everything but the depth: the peek, whose Op has no exported name.
		if failPeeks && op != azdispatch.OpDepth {
			return errors.New("injected peek failure")
		}
		return nil
	}})
	ctx := context.Background()
	send(t, a, 4, "work")
	clock.Advance(30 * time.Second)
	send(t, b, 6, "work")
	clock.Advance(5 * time.Second)
	sq, err := azdispatch.NewShardedQueue("tasks", []azdispatch.Shard{a, b}, nil)
	require.NoError(t, err)
	// 10 messages, 1 a second per worker, within 10 s: 1 worker, but the
	// oldest has waited 35 s: late, so doubled at most.
	h, err := NewDepthHandler(sq, &DepthOptions{CacheFor: -1, TargetWait: 10 * time.Second, WorkerRate: 1})
	require.NoError(t, err)

	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	require.NotNil(t, rep.OldestAge)
	assert.Equal(t, 35.0, *rep.OldestAge)
	require.Len(t, rep.Shards, 2)
	assert.Equal(t, 35.0, *rep.Shards[0].OldestAge)
	assert.Equal(t, 5.0, *rep.Shards[1].OldestAge)
	require.NotNil(t, rep.DesiredWorkers)
	assert.Equal(t, 2, *rep.DesiredWorkers)
	assert.EqualValues(t, 1, a.Transactions().Other, "one peek per shard")
	assert.EqualValues(t, 1, b.Transactions().Other)

	// The old messages are handled: the young ones are not late.
	for range 4 {
		ds, err := a.Receive(ctx, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.NoError(t, a.Delete(ctx, ds[0]))
	}
	_, body = get(t, h)
	require.NoError(t, json.Unmarshal(body, &rep))
	assert.Equal(t, 5.0, *rep.OldestAge)
	assert.Equal(t, 6, *rep.Depth)
	assert.Equal(t, 1, *rep.DesiredWorkers, "ceil(6 / 10)")

	mu.Lock()
	failPeeks = true
	mu.Unlock()
	code, body = get(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	rep = depthReport{}
	require.NoError(t, json.Unmarshal(body, &rep))
	assert.Nil(t, rep.Depth)
	assert.Nil(t, rep.OldestAge)
	assert.Nil(t, rep.DesiredWorkers)
	assert.Contains(t, rep.Shards[1].Error, "injected peek failure")
	assert.NotNil(t, rep.Shards[1].Depth)
}

// Work sent for later does not ask for workers: with 1,000 messages due
// tomorrow and none due now, "due" is 0 and so is desired_workers (it was
// ceil(1,000 / (r × W)), and KEDA ran that many replicas for a day with
// nothing to do). Messages due now count; a peek that is full falls back
// to the depth, which may then count some sent for later (documented).
func TestDesiredWorkersCountOnlyTheWorkDueNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("orders", nil)
	for range 1000 {
		_, err := q.Send(ctx, "tomorrow", &azdispatch.SendOptions{Delay: 24 * time.Hour})
		require.NoError(t, err)
	}
	h, err := NewDepthHandler(q, &DepthOptions{CacheFor: -1, TargetWait: 10 * time.Second, WorkerRate: 1})
	require.NoError(t, err)
	reading := func() depthReport {
		code, body := get(t, h)
		require.Equal(t, http.StatusOK, code, string(body))
		var rep depthReport
		require.NoError(t, json.Unmarshal(body, &rep))
		return rep
	}
	rep := reading()
	assert.Equal(t, 1000, *rep.Depth, "the depth counts them")
	assert.Equal(t, 0, *rep.Due, "none is due")
	assert.Equal(t, 0, *rep.DesiredWorkers, "no worker for work due tomorrow")

	send(t, q, 25, "now")
	rep = reading()
	assert.Equal(t, 25, *rep.Due)
	assert.Equal(t, 3, *rep.DesiredWorkers, "ceil(25 / (1 × 10))")

	send(t, q, 10, "now")
	rep = reading()
	assert.Equal(t, 1035, *rep.Due, "a full peek: the depth, which cannot be told apart")
}

// While the queue is paused the endpoint asks for no worker, whatever the
// backlog, and says who paused it until when; the depth stays the truth.
func TestDepthHandlerAsksForNoWorkerWhilePaused(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	h, err := NewDepthHandler(q, &DepthOptions{CacheFor: -1, TargetWait: time.Hour, WorkerRate: 0.001})
	require.NoError(t, err)
	send(t, q, 7, "work")
	ctx := context.Background()
	st, err := q.Pause(ctx, time.Hour, &azdispatch.PauseOptions{By: "ops"})
	require.NoError(t, err)

	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	n, ok := gjsonNumber(body, kedaDesiredLocation)
	require.True(t, ok, string(body))
	assert.Zero(t, n, "a paused queue wants no worker")
	depth, _ := gjsonNumber(body, kedaValueLocation)
	assert.Equal(t, 7.0, depth)
	var rep struct {
		Paused *pausedReport `json:"paused"`
	}
	require.NoError(t, json.Unmarshal(body, &rep))
	require.NotNil(t, rep.Paused, string(body))
	assert.Equal(t, "ops", rep.Paused.By)
	assert.True(t, st.Until.Equal(rep.Paused.Until))

	require.NoError(t, q.Resume(ctx))
	_, body = get(t, h)
	n, _ = gjsonNumber(body, kedaDesiredLocation)
	assert.Equal(t, 2.0, n, "resumed: ceil(7 / 3.6) again")
	assert.NotContains(t, string(body), `"paused"`)
}
