package azdispatch_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// childProc is this test binary run again as one test, a process of its
// own that a test can kill, pause or race against, and what it reports:
// its "child: <what>: <value>" lines.
type childProc struct {
	who     string // for failure messages
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string   // its "child: " lines, prefix cut
	scanned chan struct{} // closed when the reader of its stdout ends
	stop    chan struct{} // closed to make that reader give up sending
	mu      sync.Mutex
	other   bytes.Buffer // its other output, for failure messages
	once    sync.Once
	waitErr error
}

// startChild runs this test binary as the test named test, with env added
// to its environment. The process is killed and waited for when t ends, if
// it has not exited.
func startChild(t *testing.T, who, test string, env ...string) *childProc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	h := &childProc{who: who, lines: make(chan string), scanned: make(chan struct{}), stop: make(chan struct{})}
	h.cmd = exec.Command(exe, "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=5m")
	h.cmd.Env = append(os.Environ(), env...)
	out, err := h.cmd.StdoutPipe()
	require.NoError(t, err)
	h.cmd.Stderr = &lockedWriter{mu: &h.mu, w: &h.other}
	h.stdin, err = h.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, h.cmd.Start())
	go h.read(out)
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill() // resumes nothing, but ends a stopped process too
		_ = h.wait()
	})
	return h
}

// read passes on the child's report lines until its stdout ends.
func (h *childProc) read(out io.Reader) {
	defer close(h.scanned)
	defer close(h.lines)
	s := bufio.NewScanner(out)
	for s.Scan() {
		line, ok := strings.CutPrefix(s.Text(), "child: ")
		if !ok {
			h.mu.Lock()
			fmt.Fprintln(&h.other, s.Text())
			h.mu.Unlock()
			continue
		}
		select {
		case h.lines <- line:
		case <-h.stop:
			return
		}
	}
}

// expect returns the value of the child's next report, which must be what.
func (h *childProc) expect(t *testing.T, what string) string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatalf("%s exited before reporting %q: %v\n%s", h.who, what, h.wait(), h.output())
		}
		v, found := strings.CutPrefix(line, what+": ")
		require.True(t, found, "%s reported %q, expected %q\n%s", h.who, line, what, h.output())
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not report %q\n%s", h.who, what, h.output())
	}
	return ""
}

// wait waits for the child's process and the reader of its output.
func (h *childProc) wait() error {
	h.once.Do(func() {
		close(h.stop)
		// The reader must drain stdout before Wait closes it.
		<-h.scanned
		h.waitErr = h.cmd.Wait()
		if h.waitErr != nil {
			h.waitErr = fmt.Errorf("%w\n%s", h.waitErr, h.output())
		}
	})
	return h.waitErr
}

func (h *childProc) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.other.String()
}

// lockedWriter serialises writes to w, shared by a child's two streams.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
