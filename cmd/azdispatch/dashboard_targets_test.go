package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startDashboard runs the built command's dashboard with env and args,
// waits for the URL it prints, and returns it with a stop that interrupts
// it (as Ctrl-C does) and returns how it ended.
func startDashboard(t *testing.T, env map[string]string, args ...string) (string, func() result) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("stopped with an interrupt, which Windows cannot send to a process")
	}
	var stdout, stderr syncBuffer
	cmd := exec.Command(harness.bin, append([]string{"dashboard"}, args...)...)
	cmd.Env, cmd.Stdout, cmd.Stderr = environ(env), &stdout, &stderr
	require.NoError(t, cmd.Start())
	ended := make(chan struct{})
	var waitErr error // set before ended closes
	go func() { waitErr = cmd.Wait(); close(ended) }()
	stopped := false
	stop := func() result {
		t.Helper()
		stopped = true
		select {
		case <-ended:
		default:
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
		}
		select {
		case <-ended:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-ended
			t.Errorf("the dashboard did not stop on an interrupt")
		}
		r := result{stdout: stdout.String(), stderr: stderr.String()}
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			r.code = ee.ExitCode()
		}
		return r
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	url := regexp.MustCompile(`on (http://\S+/)`)
	var u string
	require.Eventually(t, func() bool {
		m := url.FindStringSubmatch(stdout.String())
		if m != nil {
			u = m[1]
		}
		select {
		case <-ended: // it ended without serving: the require below says why
			return true
		default:
			return m != nil
		}
	}, time.Minute, 20*time.Millisecond)
	require.NotEmpty(t, u, "stdout: %s\nstderr: %s", &stdout, &stderr)
	return u, stop
}

// The dashboard shows every target given, in the order given: repeated
// -queue, and -base with its own -shards each.
func TestDashboardServesSeveralTargets(t *testing.T) {
	t.Parallel()
	connA, connB := accounts(t)
	a, b := twoAccounts(t, connA, connB)
	ctx := context.Background()
	first, second := createdQueue(t, connA), createdQueue(t, connA)
	_, err := first.Send(ctx, "hello", nil)
	require.NoError(t, err)
	base := uniqueName(t)
	fullSet(t, base, 2, a, b)
	env := map[string]string{"AZ_ACCOUNT_A": connA, "AZ_ACCOUNT_B": connB}

	u, stop := startDashboard(t, env, "-queue", first.Name(), "-queue", second.Name(), "-account-env", "AZ_ACCOUNT_A", "-addr", "127.0.0.1:0")
	page := get(t, u)
	for _, name := range []string{first.Name(), second.Name()} {
		assert.Contains(t, page, name)
	}
	assert.NotContains(t, page, "AccountKey")
	r := stop()
	assert.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "azdispatch dashboard of "+first.Name()+", "+second.Name()+" (read-only) on http://127.0.0.1:")

	// Two sets over two accounts: each -base with its -shards, in order.
	other := uniqueName(t)
	fullSet(t, other, 3, a, b)
	u, stop = startDashboard(t, env, "-base", base, "-base", other, "-shards", "2", "-shards", "3",
		"-account-env", "AZ_ACCOUNT_A", "-account-env", "AZ_ACCOUNT_B", "-addr", "127.0.0.1:0")
	page = get(t, u)
	for _, name := range []string{base + "-0", base + "-1", other + "-0", other + "-1", other + "-2"} {
		assert.Contains(t, page, name)
	}
	r = stop()
	assert.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "azdispatch dashboard of "+base+", "+other+" (read-only)")

	// The -shards of two sets swapped: refused before serving, naming both.
	r = run(t, env, "", "dashboard", "-base", base, "-base", other, "-shards", "3", "-shards", "2",
		"-account-env", "AZ_ACCOUNT_A", "-account-env", "AZ_ACCOUNT_B", "-addr", "127.0.0.1:0")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, "-shards 3 does not match the set "+base)
	assert.Empty(t, r.stdout, "nothing served")
}

// get fetches u and returns its body, which must come with 200 OK.
func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}
