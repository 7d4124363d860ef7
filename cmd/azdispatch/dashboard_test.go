package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a buffer the command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveDashboard runs azdispatch dashboard in process until the test ends,
// and returns its URL and its stderr.
func serveDashboard(t *testing.T, conn string, args ...string) (string, *syncBuffer) {
	t.Helper()
	var stdout, stderr syncBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string {
			if k == defaultAccountEnv {
				return conn
			}
			return ""
		}, terminal: func() bool { return false }}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- c.run(ctx, append([]string{"dashboard"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case got := <-code:
			assert.Equal(t, exitOK, got, "stderr: %s", stderr.String())
		case <-time.After(30 * time.Second):
			t.Error("the dashboard did not stop")
		}
	})
	url := regexp.MustCompile(`on (http://\S+/)`)
	var u string
	require.Eventually(t, func() bool {
		if m := url.FindStringSubmatch(stdout.String()); m != nil {
			u = m[1]
			return true
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "stdout: %s\nstderr: %s", &stdout, &stderr)
	return u, &stderr
}

func TestDashboardServesTheQueueReadOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	q := createdQueue(t, conn)
	_, err := q.Send(context.Background(), "hello", nil)
	require.NoError(t, err)
	u, stderr := serveDashboard(t, conn, "-queue", q.Name(), "-addr", "127.0.0.1:0")
	resp, err := http.Get(u)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), q.Name())
	assert.Contains(t, string(body), `<td class="num depth">1</td>`)
	assert.Contains(t, string(body), "read-only")
	assert.NotContains(t, string(body), "AccountKey")
	assert.NotContains(t, stderr.String(), "WARNING")
}

func TestDashboardWarnsWhenBoundBeyondLoopback(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	q := createdQueue(t, conn)
	_, stderr := serveDashboard(t, conn, "-queue", q.Name(), "-addr", "0.0.0.0:0", "-write")
	assert.Contains(t, stderr.String(), "WARNING")
	assert.Contains(t, stderr.String(), "without TLS or authentication")
}
