package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
)

// cleanError says what failed, never where: each error below names a host,
// a port, an address, a URL or a SAS, and none of them may be shown.
func TestCleanErrorSaysWhatFailedNotWhere(t *testing.T) {
	t.Parallel()
	sasURL := "https://acct.queue.core.windows.net/orders/messages?sv=2022-11-02&sig=SECRETSIG%3D"
	dial := func(errno error) error {
		return &url.Error{Op: "Post", URL: sasURL, Err: &net.OpError{Op: "dial", Net: "tcp",
			Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10001}, Err: os.NewSyscallError("connect", errno)}}
	}
	req, _ := http.NewRequest(http.MethodGet, sasURL, nil)
	forbidden := &azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationPermissionMismatch",
		RawResponse: &http.Response{StatusCode: 403, Request: req, Header: http.Header{}}}
	dns := &url.Error{Op: "Get", URL: sasURL, Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "acct.queue.core.windows.net", Server: "10.0.0.53:53", IsNotFound: true}}}
	timeout := &url.Error{Op: "Get", URL: sasURL, Err: context.DeadlineExceeded}
	shardErr := func(q string, err error) error {
		return &azdispatch.StorageError{Op: azdispatch.OpReceive, Queue: q, Err: err}
	}

	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", &azdispatch.StorageError{Op: azdispatch.OpSend, Queue: "orders", Err: dial(syscall.ECONNREFUSED)},
			`send on queue "orders": connection refused`},
		{"reset", &azdispatch.StorageError{Op: azdispatch.OpDepth, Queue: "orders", Err: dial(syscall.ECONNRESET)},
			`depth on queue "orders": connection reset`},
		{"bare transport error", dial(syscall.ECONNREFUSED), "connection refused"},
		{"timed out", &azdispatch.StorageError{Op: azdispatch.Op("peek"), Queue: "orders", Err: timeout}, `peek on queue "orders": timed out`},
		{"host not found", &azdispatch.StorageError{Op: azdispatch.OpDepth, Queue: "orders", Err: dns}, `depth on queue "orders": host not found`},
		{"forbidden", &azdispatch.StorageError{Op: azdispatch.OpReceive, Queue: "orders", StatusCode: 403, Code: "AuthorizationPermissionMismatch", Err: forbidden},
			`receive on queue "orders": 403 AuthorizationPermissionMismatch (forbidden) (the credential needs the Process permission on the queue)`},
		{"throttled", &azdispatch.StorageError{Op: azdispatch.OpDepth, Queue: "orders", StatusCode: 503, Code: "ServerBusy"},
			`depth on queue "orders": 503 ServerBusy (throttled)`},
		{"not found", &azdispatch.StorageError{Op: azdispatch.OpReceive, Queue: "orders-poison", StatusCode: 404, Code: "QueueNotFound"},
			`receive on queue "orders-poison": 404 QueueNotFound (not found)`},
		{"a response error alone", fmt.Errorf("listing: %w", forbidden), "listing: 403 AuthorizationPermissionMismatch (forbidden)"},
		{"wrapped", fmt.Errorf("orders-poison: %w", &azdispatch.StorageError{Op: azdispatch.OpReceive, Queue: "orders-poison", Err: dial(syscall.ECONNREFUSED)}),
			`orders-poison: receive on queue "orders-poison": connection refused`},
		{"joined", errors.Join(
			fmt.Errorf("a-poison: %w", shardErr("a-poison", dial(syscall.ECONNREFUSED))),
			fmt.Errorf("b-poison: %w", shardErr("b-poison", timeout))),
			`a-poison: receive on queue "a-poison": connection refused; b-poison: receive on queue "b-poison": timed out`},
		{"no healthy shard", fmt.Errorf("%w: %s on %q: %w", azdispatch.ErrNoHealthyShard, "receive", "jobs",
			errors.Join(shardErr("jobs-0", dial(syscall.ECONNREFUSED)), shardErr("jobs-1", dns))),
			`azdispatch: no healthy shard: receive on "jobs": receive on queue "jobs-0": connection refused; receive on queue "jobs-1": host not found`},
		{"cancelled", context.Canceled, "context canceled"},
		{"the library's own words", &azdispatch.ConfigError{Field: "dashboard.Options.Sources", Reason: "empty"},
			"azdispatch: invalid dashboard.Options.Sources: empty"},
		{"a time is not an address", errors.New("backed off until 2026-01-02T15:04:05Z"), "backed off until 2026-01-02T15:04:05Z"},
		{"words with an address", errors.New("proxy 10.0.0.1:3128 and [::1]:80 and azurite:10000 and http://x.example/q?sig=abc and acct.blob.core.windows.net refused"),
			"proxy (address) and (address) and (address) and (URL) and (host) refused"},
		{"words with a key", errors.New("AccountKey=c2VjcmV0LWtleS10aGF0LW11c3Qtbm90LWxlYWstYW55d2hlcmU= rejected"), "(secret) rejected"},
	} {
		got := cleanError(c.err)
		assert.Equal(t, c.want, got, c.name)
		for _, s := range []string{"127.0.0.1", "10001", "10.0.0.53", "://", "SECRETSIG", "sig=", "core.windows.net", "c2VjcmV0"} {
			assert.NotContains(t, got, s, c.name)
		}
		assert.NotContains(t, got, "\n", c.name)
	}
	assert.Empty(t, cleanError(nil))
}

// bounded cuts between characters, never inside one.
func TestBoundedCutsBetweenCharacters(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("€", 100) // 3 bytes each
	got := bounded(s, 200)
	assert.Equal(t, strings.Repeat("€", 66), got)
	assert.Equal(t, "abc", bounded("abc", 200))
	assert.Equal(t, "", bounded("€", 2))
}
