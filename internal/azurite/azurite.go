// Package azurite starts a private Azurite (the Azure Storage emulator from
// npm) for tests, examples and the load-test program, and stops it afterwards.
//
// Azurite is pinned by an embedded package-lock.json and installed once into
// a per-user cache dir, so tests need only Node.js and npm, not a global
// install. Each Instance is a separate process on free ports with in-memory
// storage, so tests never share state unless they opt in through
// EnvConnectionString.
//
// It works on Linux, macOS and Windows. What differs per OS is how the
// emulator is grouped, stopped and cleaned up after a crash of the Go
// program (see Stop, Kill and CPUTime): a process group on Unix, a job
// object on Windows.
package azurite

import (
	"bufio"
	"context"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvConnectionString names an environment variable holding a connection
// string of an existing emulator or a real storage account; when set, Start
// uses it instead of starting Azurite (unless Options.Fresh is set). This lets
// CI or a developer point the tests at a shared emulator or real Azure.
const EnvConnectionString = "AZDISPATCH_CONNECTION_STRING"

// EnvCacheDir overrides where the pinned Azurite is installed (default:
// os.UserCacheDir()/azdispatch/azurite-<first 12 hex of sha256 of the
// embedded lockfile>), e.g. for read-only home dirs or a shared CI cache.
const EnvCacheDir = "AZDISPATCH_AZURITE_CACHE"

// HowTo is the advice printed when Azurite cannot be had.
const HowTo = "Running Azurite needs Node.js >= 20 and npm on PATH (https://nodejs.org/), " +
	"and the npm registry on first use (it installs azurite@3.37.0 into the cache dir, see " +
	EnvCacheDir + "); or set " + EnvConnectionString +
	" to the connection string of a running emulator or an account."

// Well-known development storage account baked into Azurite (public, not a secret,
// but still kept out of logs so real keys handled the same way never leak).
const (
	devAccount = "devstoreaccount1"
	devKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

const (
	startTimeout = 60 * time.Second
	stopGrace    = 3 * time.Second // Azurite may ignore SIGTERM during its GC (Unix only)
	tailLines    = 50
)

// listenRE matches Azurite's startup lines, which are the only race-free way
// to learn the ports it bound when started with port 0.
var listenRE = regexp.MustCompile(`Azurite (Blob|Queue|Table) service is successfully listening at (https?://\S+)`)

// Options configures Start. A nil *Options means the zero value.
type Options struct {
	// Fresh always starts a new private process, ignoring
	// EnvConnectionString (load tests need a fresh process per scenario).
	Fresh bool
	// Log, if non-nil, receives the emulator's output lines (default: discarded).
	Log io.Writer
	// HTTPS serves every endpoint over HTTPS, with a self-signed certificate
	// made for the instance (for 127.0.0.1, ::1 and localhost); clients
	// trust it through Instance.TLSConfig. It implies Fresh.
	HTTPS bool
	// OAuth makes the emulator accept bearer tokens (Azurite's
	// "--oauth basic"; see Token for what it checks) besides the account
	// key and SAS. Azurite takes bearer tokens only over HTTPS, and the
	// Azure SDK sends them only there, so it implies HTTPS.
	OAuth bool
	// Accounts is how many storage accounts the emulator serves: the
	// well-known devstoreaccount1, then devstoreaccount2, … each with a key
	// of its own (see AccountConnectionString), through Azurite's
	// AZURITE_ACCOUNTS. Zero means one. More than one implies Fresh.
	Accounts int
	// ClockOffset, if not zero, runs the emulator on a clock this far from
	// the real one (ahead if positive), from its first answer: every time
	// it reports, the Date header included, is moved. Instance.SetClockOffset
	// moves it later. It implies Fresh. (To run on the real clock and move
	// it later, give a nonzero offset such as a nanosecond.)
	ClockOffset time.Duration
}

// account is one storage account an instance serves.
type account struct{ name, key string }

// accountsFor returns the n accounts an instance serves: the well-known
// one first, then accounts whose keys are derived from their names (test
// keys, not secrets, but kept out of logs as real keys are).
func accountsFor(n int) []account {
	accts := []account{{devAccount, devKey}}
	for i := 2; i <= n; i++ {
		name := fmt.Sprintf("devstoreaccount%d", i)
		sum := sha512.Sum512([]byte("azdispatch test account " + name))
		accts = append(accts, account{name, base64.StdEncoding.EncodeToString(sum[:])})
	}
	return accts
}

// Instance is a running private Azurite, or an external account described by
// EnvConnectionString. Its methods are safe for concurrent use.
type Instance struct {
	external bool
	connStr  string
	account  string
	key      string
	queueURL string
	blobURL  string
	roots    *x509.CertPool // trusts the emulator's certificate; nil over HTTP
	protocol string         // of a private process: "http" or "https"
	accounts []account      // of a private process

	// Private process only.
	cmd     *exec.Cmd
	group   *procGroup // node and anything it starts, for stopping and CPU time
	workDir string
	// clockFile holds the emulator's clock offset (see SetClockOffset);
	// empty unless Options.ClockOffset was set.
	clockFile string
	out       *os.File      // read end of the child's stdout+stderr
	exited    chan struct{} // closed once cmd.Wait returned
	waitErr   error         // set before exited is closed
	outDone   chan struct{} // closed once the output goroutine finished
	ready     chan struct{} // closed once blob and queue ports are known

	mu     sync.Mutex
	tail   []string // last tailLines output lines, for error messages
	ports  map[string]string
	halted bool // set once, under mu, before group is terminated and closed
}

// Start returns an emulator to talk to: the account in EnvConnectionString if
// set (and none of opts.Fresh, HTTPS and OAuth is), otherwise a new private
// Azurite on free ports, installed first if needed. ctx bounds installation
// and startup; the instance itself lives until Stop or Kill.
func Start(ctx context.Context, opts *Options) (*Instance, error) {
	if opts == nil {
		opts = &Options{}
	}
	https := opts.HTTPS || opts.OAuth
	accts := accountsFor(opts.Accounts)
	if cs := os.Getenv(EnvConnectionString); cs != "" && !opts.Fresh && !https && len(accts) == 1 && opts.ClockOffset == 0 {
		return external(cs)
	}
	dir, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	work, err := os.MkdirTemp("", "azurite-")
	if err != nil {
		return nil, fmt.Errorf("azurite: %w", err)
	}
	args := []string{filepath.Join(dir, entryPoint),
		"--blobPort", "0", "--queuePort", "0", "--tablePort", "0",
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry", "--silent"}
	var roots *x509.CertPool
	if https {
		certFile, keyFile, pool, err := writeSelfSigned(work)
		if err != nil {
			_ = os.RemoveAll(work)
			return nil, err
		}
		roots = pool
		args = append(args, "--cert", certFile, "--key", keyFile)
	}
	if opts.OAuth {
		args = append(args, "--oauth", "basic")
	}
	var clockEnv []string
	var clockFile string
	if opts.ClockOffset != 0 {
		if clockEnv, clockFile, err = writeClock(work, opts.ClockOffset); err != nil {
			_ = os.RemoveAll(work)
			return nil, err
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = os.RemoveAll(work)
		return nil, fmt.Errorf("azurite: %w", err)
	}
	// Not CommandContext: ctx only bounds startup, not the instance's life.
	// "node" resolves to node.exe on Windows (LookPath honours PATHEXT).
	cmd := exec.Command("node", args...)
	cmd.Dir = work
	cmd.Env = append(childEnv(accts), clockEnv...)
	// One pipe as *os.File for both streams: exec then starts no copying
	// goroutines, and our reader sees lines in the order they were written.
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		_ = os.RemoveAll(work)
		return nil, fmt.Errorf("azurite: starting node: %w\n%s", err, HowTo)
	}
	pw.Close() // the child holds its own copy; EOF on pr now means it is gone
	// Before cmd.Wait can run: on Windows this opens node by pid, which is
	// only safe while cmd.Process still holds its handle.
	group, err := newProcGroup(cmd.Process)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pr.Close()
		_ = os.RemoveAll(work)
		return nil, fmt.Errorf("azurite: %w", err)
	}

	i := &Instance{
		account: devAccount, key: devKey, roots: roots, accounts: accts,
		cmd: cmd, group: group, workDir: work, out: pr, clockFile: clockFile,
		exited: make(chan struct{}), outDone: make(chan struct{}), ready: make(chan struct{}),
		ports: map[string]string{},
	}
	go i.readOutput(opts.Log)
	go func() {
		i.waitErr = cmd.Wait()
		close(i.exited)
	}()

	if err := i.awaitReady(ctx); err != nil {
		_ = i.halt(false)
		return nil, fmt.Errorf("azurite: start (pid %d): %w\nlast output:\n%s", cmd.Process.Pid, err, i.lastOutput())
	}
	protocol := "http"
	if https {
		protocol = "https"
	}
	i.protocol = protocol
	i.connStr = i.AccountConnectionString(0)
	return i, nil
}

// childEnv sets AZURITE_ACCOUNTS to the accounts the instance serves, or,
// for the well-known account alone, drops it: a value inherited from the
// environment would replace the account the connection strings we hand out
// rely on.
func childEnv(accts []account) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AZURITE_ACCOUNTS=") {
			env = append(env, kv)
		}
	}
	if len(accts) > 1 {
		var list []string
		for _, a := range accts {
			list = append(list, a.name+":"+a.key)
		}
		env = append(env, "AZURITE_ACCOUNTS="+strings.Join(list, ";"))
	}
	return env
}

// readOutput drains the child's output until EOF so it never blocks on a full
// pipe, keeps a tail for error messages, and picks up the listening ports.
func (i *Instance) readOutput(log io.Writer) {
	defer close(i.outDone)
	sc := bufio.NewScanner(i.out)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if log != nil {
			_, _ = io.WriteString(log, line+"\n")
		}
		i.mu.Lock()
		i.tail = append(i.tail, line)
		if len(i.tail) > tailLines {
			i.tail = i.tail[len(i.tail)-tailLines:]
		}
		if m := listenRE.FindStringSubmatch(line); m != nil {
			i.ports[m[1]] = strings.TrimRight(m[2], "/")
			if i.ports["Queue"] != "" && i.ports["Blob"] != "" && i.queueURL == "" {
				i.queueURL = i.ports["Queue"] + "/" + devAccount
				i.blobURL = i.ports["Blob"] + "/" + devAccount
				close(i.ready)
			}
		}
		i.mu.Unlock()
	}
	// Keep draining after a scan error (e.g. an absurdly long line) so the
	// child still never blocks; EOF comes when it exits.
	_, _ = io.Copy(io.Discard, i.out)
}

// awaitReady waits for the ports to be printed and then for the queue
// service to answer HTTP: Azurite prints before every service is serving.
func (i *Instance) awaitReady(ctx context.Context) error {
	select {
	case <-i.ready:
	case <-i.exited:
		<-i.outDone // so the tail holds the dying words
		return fmt.Errorf("process exited early: %v", i.waitErr)
	case <-ctx.Done():
		return fmt.Errorf("waiting for listening ports: %w", ctx.Err())
	}
	tr := &http.Transport{Proxy: nil, TLSClientConfig: i.TLSConfig()} // never send loopback traffic to a proxy
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, i.QueueEndpoint()+"?comp=list", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil { // any status will do; 403 without auth is expected
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		select {
		case <-i.exited:
			<-i.outDone
			return fmt.Errorf("process exited early: %v", i.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the queue endpoint to answer: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (i *Instance) lastOutput() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return strings.Join(i.tail, "\n")
}

// Accounts is how many storage accounts the instance serves: one for an
// external account.
func (i *Instance) Accounts() int { return max(len(i.accounts), 1) }

// AccountConnectionString returns the connection string of account n (0
// to Accounts()-1; 0 is ConnectionString's). It holds the account key: do
// not log it.
func (i *Instance) AccountConnectionString(n int) string {
	if i.external {
		return i.connStr
	}
	a := i.accounts[n]
	host := func(u string) string { return strings.TrimSuffix(u, "/"+devAccount) }
	return "DefaultEndpointsProtocol=" + i.protocol + ";AccountName=" + a.name + ";AccountKey=" + a.key +
		";BlobEndpoint=" + host(i.blobURL) + "/" + a.name + ";QueueEndpoint=" + host(i.queueURL) + "/" + a.name + ";"
}

// ConnectionString returns a connection string for the Azure SDKs. It holds
// the account key: do not log it.
func (i *Instance) ConnectionString() string { return i.connStr }

// AccountName returns the storage account name (devstoreaccount1 for Azurite).
func (i *Instance) AccountName() string { return i.account }

// AccountKey returns the base64 account key, empty if an external connection
// string has none (e.g. SAS). Do not log it.
func (i *Instance) AccountKey() string { return i.key }

// QueueEndpoint returns the queue service URL including the account path for
// Azurite, e.g. http://127.0.0.1:37485/devstoreaccount1.
func (i *Instance) QueueEndpoint() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.queueURL
}

// BlobEndpoint returns the blob service URL, like QueueEndpoint.
func (i *Instance) BlobEndpoint() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.blobURL
}

// External reports whether the instance came from EnvConnectionString, in
// which case this package neither started nor will stop anything.
func (i *Instance) External() bool { return i.external }

// PID returns the emulator's process id, or 0 when external. On Unix it is
// also the id of the emulator's process group.
func (i *Instance) PID() int {
	if i.external {
		return 0
	}
	return i.cmd.Process.Pid
}

// CPUTime returns the user+system CPU time the emulator process has used so
// far, so load tests can tell how much of the cost is the emulator's. It is
// read from /proc on Linux, with GetProcessTimes on Windows, and from ps on
// macOS and other Unix systems. It fails when external, after Stop or Kill,
// and once the process has exited.
func (i *Instance) CPUTime() (time.Duration, error) {
	if i.external {
		return 0, errors.New("azurite: CPUTime of an external account is unknown")
	}
	// Holding mu keeps halt from closing the group (on Windows, the process
	// handle) while it is read.
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.halted {
		return 0, errors.New("azurite: CPUTime: emulator has been stopped")
	}
	select {
	case <-i.exited:
		return 0, errors.New("azurite: CPUTime: process has exited")
	default:
	}
	return i.group.cpuTime()
}

// Stop shuts the emulator down. On Unix it sends SIGTERM to the emulator's
// process group, then SIGKILL after 3 s because Azurite can ignore SIGTERM
// during its periodic cleanup. On Windows, which has no SIGTERM for a
// console program, it terminates the emulator's job object at once, so Stop
// is the same as Kill there (storage is in memory, so nothing is lost that a
// graceful stop would have saved). It waits for the process and its output
// reader and removes the temp working dir. It is idempotent and a no-op for
// external instances; it reports an error if the emulator had already died
// on its own.
//
// Should the Go program die without calling Stop, the emulator dies with it
// on Linux (parent-death signal) and Windows (kill-on-close job object); on
// macOS and other Unix systems it keeps running until killed.
func (i *Instance) Stop() error { return i.halt(true) }

// Kill stops the emulator at once (SIGKILL to its process group on Unix,
// terminating its job object on Windows) and waits, like Stop; tests use it
// to simulate a crashed account. It is idempotent and a no-op for external
// instances.
func (i *Instance) Kill() error { return i.halt(false) }

func (i *Instance) halt(graceful bool) error {
	if i.external {
		return nil
	}
	i.mu.Lock()
	if i.halted {
		i.mu.Unlock()
		return nil
	}
	i.halted = true
	i.mu.Unlock()

	var errs []error
	select {
	case <-i.exited:
		errs = append(errs, fmt.Errorf("azurite: pid %d had already exited: %v\nlast output:\n%s",
			i.cmd.Process.Pid, i.waitErr, i.lastOutput()))
	default:
		// Errors are ignored: the only likely one is that the process has just
		// exited on its own, and waiting for exited below settles it either way.
		// A paused emulator would take SIGTERM only once resumed.
		_ = i.group.resume()
		if graceful {
			_ = i.group.terminate(true)
			select {
			case <-i.exited:
			case <-time.After(stopGrace):
				_ = i.group.terminate(false)
				<-i.exited
			}
		} else {
			_ = i.group.terminate(false)
			<-i.exited
		}
	}
	// On Windows this closes the job, killing anything node left behind.
	i.group.close()
	// The output reader ends at EOF once every holder of the pipe is gone;
	// should a stray grandchild keep it open, closing our end unblocks it.
	select {
	case <-i.outDone:
	case <-time.After(5 * time.Second):
		_ = i.out.Close()
		<-i.outDone
	}
	_ = i.out.Close()
	if err := os.RemoveAll(i.workDir); err != nil {
		errs = append(errs, fmt.Errorf("azurite: %w", err))
	}
	return errors.Join(errs...)
}

// ForTest starts an instance for tb (honouring EnvConnectionString),
// registers tb.Cleanup(Stop), and on failure calls tb.Fatalf with the HowTo
// text. It never skips: a missing emulator must fail loudly, not silently
// turn integration tests green.
func ForTest(tb testing.TB) *Instance {
	tb.Helper()
	inst, err := Start(tb.Context(), nil)
	if err != nil {
		msg := err.Error()
		if !strings.Contains(msg, HowTo) {
			msg += "\n" + HowTo
		}
		tb.Fatalf("%s", msg)
	}
	tb.Cleanup(func() {
		if err := inst.Stop(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return inst
}

// external describes an account given by connection string. Errors never
// quote the string, since it usually holds a key.
func external(cs string) (*Instance, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			kv[strings.ToLower(k)] = v // keys are case-insensitive; keys may end in '='
		}
	}
	i := &Instance{external: true, connStr: cs, account: kv["accountname"], key: kv["accountkey"]}
	if strings.EqualFold(kv["usedevelopmentstorage"], "true") {
		i.account, i.key = devAccount, devKey
		i.blobURL = "http://127.0.0.1:10000/" + devAccount
		i.queueURL = "http://127.0.0.1:10001/" + devAccount
		return i, nil
	}
	i.queueURL = strings.TrimRight(kv["queueendpoint"], "/")
	i.blobURL = strings.TrimRight(kv["blobendpoint"], "/")
	if i.account != "" {
		proto := kv["defaultendpointsprotocol"]
		if proto == "" {
			proto = "https"
		}
		suffix := kv["endpointsuffix"]
		if suffix == "" {
			suffix = "core.windows.net"
		}
		if i.queueURL == "" {
			i.queueURL = proto + "://" + i.account + ".queue." + suffix
		}
		if i.blobURL == "" {
			i.blobURL = proto + "://" + i.account + ".blob." + suffix
		}
	}
	if i.queueURL == "" {
		return nil, fmt.Errorf("azurite: %s has neither QueueEndpoint, AccountName nor UseDevelopmentStorage=true", EnvConnectionString)
	}
	if _, err := url.Parse(i.queueURL); err != nil {
		return nil, fmt.Errorf("azurite: %s: QueueEndpoint is not a URL", EnvConnectionString)
	}
	return i, nil
}
