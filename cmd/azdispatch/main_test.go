package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// The tests run the command as a user would: built once into a temporary
// directory, and run as a subprocess against private Azurite instances.

// harness is what TestMain sets up for every test: the built binary and,
// started on first use, two emulators standing for two storage accounts.
var harness struct {
	bin string

	once      sync.Once
	emulators [2]*azurite.Instance
	err       error
}

// TestMain builds the binary, runs the tests, stops the emulators, and then
// fails a passing run that left a goroutine running.
func TestMain(m *testing.M) {
	flag.Parse()
	azurite.WidenParallel()
	if _, err := azurite.ShortRunError(); err != nil {
		fmt.Fprintln(os.Stderr, "azdispatch CLI tests:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "azdispatch-cli-test")
	if err == nil {
		harness.bin = filepath.Join(dir, "azdispatch"+exeSuffix())
		err = build(harness.bin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the command:", err)
		os.Exit(1)
	}
	code := m.Run()
	external := false
	for _, em := range harness.emulators {
		if em != nil {
			external = external || em.External()
			if err := em.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping Azurite:", err)
			}
		}
	}
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goroutinesLeft(external); err != nil {
			fmt.Fprintln(os.Stderr, "the tests passed but left goroutines running:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

// build compiles the command into bin with the go command running the tests.
func build(bin string) error {
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go"+exeSuffix())
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	out, err := exec.Command(gocmd, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// goroutinesLeft waits for the goroutines of the test's own clients to end
// once the emulators are gone (their connections close from the other side),
// and reports any left. Connections kept idle to an external account that
// outlives the run are left to their idle timeout.
func goroutinesLeft(external bool) error {
	var opts []goleak.Option
	if external {
		opts = append(opts,
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// accounts returns the connection strings of the two emulators, starting
// them on first use; it skips under -short and fails, never skips, when
// Azurite cannot be had.
func accounts(t *testing.T) (string, string) {
	t.Helper()
	azurite.SkipIfShort(t)
	harness.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for i := range harness.emulators {
			harness.emulators[i], harness.err = azurite.Start(ctx, nil)
			if harness.err != nil {
				harness.err = fmt.Errorf("%w\n%s", harness.err, azurite.HowTo)
				return
			}
		}
	})
	if harness.err != nil {
		t.Fatalf("the CLI tests need Azurite: %v", harness.err)
	}
	return harness.emulators[0].ConnectionString(), harness.emulators[1].ConnectionString()
}

// result is what one run of the command did.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs the command with args, the environment variables env (and none
// of the caller's storage credentials) and stdin.
func run(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.bin, args...)
	cmd.Env = environ(env)
	cmd.Stdin = strings.NewReader(stdin)
	return runCmd(t, cmd, args)
}

// environ is the test's environment with the variables env and none of the
// caller's storage credentials.
func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(strings.ToUpper(k), "AZURE_") || strings.HasPrefix(strings.ToUpper(k), "AZDISPATCH_") {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runCmd runs cmd, made by run or a test of its own, and collects what it
// printed and its exit code.
func runCmd(t *testing.T, cmd *exec.Cmd, args []string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return r
}

// runJSON runs the command with -json, checks its exit code and decodes its
// one JSON document into doc.
func runJSON(t *testing.T, env map[string]string, want int, doc any, args ...string) result {
	t.Helper()
	r := run(t, env, "", append(args, "-json")...)
	require.Equal(t, want, r.code, "%v\n%s", args, r)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	require.NoError(t, dec.Decode(doc), "%v\n%s", args, r)
	require.False(t, dec.More(), "one JSON document: %s", r)
	return r
}

// uniqueName returns a fresh queue or container name.
func uniqueName(t *testing.T) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "c" + hex.EncodeToString(b)
}

// poisonAll runs a listener on src whose handler refuses every message
// with a permanent error naming its text, until n messages are poisoned.
func poisonAll(t *testing.T, src azdispatch.Source, n int64) {
	t.Helper()
	l, err := azdispatch.NewListener(src, func(_ context.Context, m *azdispatch.Message[string]) error {
		return azdispatch.Permanent(errors.New("rejected " + m.Body))
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(10*time.Millisecond, 200*time.Millisecond)}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for l.State().Poisoned < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, n, l.State().Poisoned, "messages poisoned: %+v", l.State())
}

// receiveText receives from src until a message with text comes, and
// deletes it.
func receiveText(t *testing.T, src azdispatch.Source, text string) *azdispatch.Delivery {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := src.Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
		require.NoError(t, err)
		for _, d := range ds {
			if d.Text == text {
				require.NoError(t, src.Delete(ctx, d))
				return d
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no message %q received", text)
	return nil
}
