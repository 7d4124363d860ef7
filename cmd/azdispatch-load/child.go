package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// child is a process of this binary in another role (a chaos worker, a
// scheduler of the schedule scenario), in a process of its own so that it
// can be killed or paused: the coordinator commands it on stdin, a line at
// a time, and it reports on stdout, a JSON line at a time.
type child struct {
	cmd    *exec.Cmd
	stderr string        // the file its stderr goes to: its log
	done   chan struct{} // closed once its stdout ended and it was waited for

	mu     sync.Mutex
	stdin  io.WriteCloser
	killed bool
}

// startChild starts exe with env added to this process's environment (the
// role and its configuration, and secrets, which process listings would
// show on a command line), its stderr to the file stderrPath, and each line
// of its stdout given to line. wg waits for the goroutine reading stdout,
// which ends when the process has.
func startChild(exe string, env []string, stderrPath string, wg *sync.WaitGroup, line func([]byte)) (*child, error) {
	errOut, err := os.Create(stderrPath)
	if err != nil {
		return nil, err
	}
	defer errOut.Close() // the child has its own copy once started
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	c := &child{cmd: cmd, stderr: stderrPath, done: make(chan struct{}), stdin: stdin}
	wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line(sc.Bytes())
		}
		_ = cmd.Wait() // only after every read from stdout, as exec requires
		close(c.done)
	})
	return c, nil
}

// command sends one command line; a process that is gone ignores it.
func (c *child) command(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stdin != nil {
		_, _ = io.WriteString(c.stdin, line+"\n")
	}
}

func (c *child) closeStdin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stdin != nil {
		_ = c.stdin.Close()
		c.stdin = nil
	}
}

// kill ends the process at once (SIGKILL; TerminateProcess on Windows),
// even a stopped one, and waits for it.
func (c *child) kill() {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	_ = c.cmd.Process.Kill()
	<-c.done
	c.closeStdin()
}

func (c *child) wasKilled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed
}

// exited reports whether the process has ended and been waited for.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stderrTail is the end of the process's log, for an error message.
func (c *child) stderrTail() string {
	b, err := os.ReadFile(c.stderr)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
