package dashboard_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A queue set shows as a set with each of its queues, their depth, their
// share of what the set received, cap and messages in hand; a test send to
// the set itself is refused (each queue has its own messages).
func TestOverviewShowsAQueueSetWithEachQueuesShare(t *testing.T) {
	t.Parallel()
	a, b := memqueue.New("tenant-a", nil), memqueue.New("tenant-b", nil)
	set, err := azdispatch.NewQueueSet("tenants", []azdispatch.SetMember{{Queue: a, Cap: 4}, {Queue: b}}, nil)
	require.NoError(t, err)
	ctx := context.Background()
	for _, q := range []*memqueue.Queue{a, a, a, b} {
		_, err := q.Send(ctx, "x", nil)
		require.NoError(t, err)
	}
	got, err := set.Receive(ctx, 4, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 4)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{set}, Write: true})
	_, _, body := get(t, srv, "")
	assert.Regexp(t, `data-name="tenants">\s*<th scope="row">tenants</th>\s*<td>queue set \(2 queues\)</td>\s*<td class="num depth">4</td>`, body)
	assert.Regexp(t, `data-name="tenant-a">\s*<th scope="row">tenant-a</th>\s*<td>queue of a set</td>`, body)
	assert.Contains(t, body, "Queue of set tenants: 75 % of the 4 messages received; 3 in hand (cap 4).")
	assert.Contains(t, body, "Queue of set tenants: 25 % of the 4 messages received; 1 in hand (no cap).")

	code, _, page := post(t, srv, url.Values{"do": {"send"}, "queue": {"tenants"}, "text": {"hello"}})
	assert.Equal(t, 400, code)
	assert.Contains(t, page, "Send to one of its queues")
}
