package azdispatch

import (
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/assert"
)

func TestRetryAfterIsReadAsTheSDKReadsIt(t *testing.T) {
	t.Parallel()
	in := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		header http.Header
		want   time.Duration
		slack  time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second, 0},
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond, 0},
		{http.Header{"X-Ms-Retry-After-Ms": {"250"}}, 250 * time.Millisecond, 0},
		{http.Header{"Retry-After": {in(10 * time.Second)}}, 10 * time.Second, 2 * time.Second},
		{http.Header{"Retry-After": {"86400"}}, maxRetryAfter, 0}, // a day: capped
		{http.Header{"Retry-After": {"-1"}}, 0, 0},
		{http.Header{"Retry-After": {"soon"}}, 0, 0},
		{http.Header{}, 0, 0},
	} {
		re := &azcore.ResponseError{StatusCode: 503, RawResponse: &http.Response{Header: tc.header}}
		assert.InDelta(t, tc.want, retryAfter(re), float64(tc.slack), "%v", tc.header)
	}
	assert.Zero(t, retryAfter(nil))
	assert.Equal(t, 5*time.Second, hintedWait(&StorageError{RetryAfter: 5 * time.Second}, time.Second))
	assert.Equal(t, 7*time.Second, hintedWait(&StorageError{RetryAfter: 5 * time.Second}, 7*time.Second))
}
