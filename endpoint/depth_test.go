package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/storagefault"
)

// kedaValueLocation is what the README's ScaledObject gives KEDA's
// metrics-api scaler as valueLocation.
const kedaValueLocation = "depth"

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
