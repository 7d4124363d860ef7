package azurite

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logWriter forwards emulator output to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("azurite: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startFresh(t *testing.T) *Instance {
	t.Helper()
	SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	begin := time.Now()
	inst, err := Start(ctx, &Options{Fresh: true, Log: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started pid %d in %v, queue %s", inst.PID(), time.Since(begin), inst.QueueEndpoint())
	t.Cleanup(func() {
		if err := inst.Stop(); err != nil {
			t.Error(err)
		}
	})
	return inst
}

var client = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}

// get returns the HTTP status of an unauthenticated list-queues request.
func get(endpoint string) (int, error) {
	resp, err := client.Get(endpoint + "?comp=list")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func hostPort(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestStartStop(t *testing.T) {
	SkipIfShort(t)
	inst := startFresh(t)
	if inst.External() || inst.PID() == 0 {
		t.Fatalf("External()=%v PID()=%d, want private process", inst.External(), inst.PID())
	}
	if inst.AccountName() != devAccount || inst.AccountKey() != devKey {
		t.Fatal("unexpected account")
	}
	for _, want := range []string{"AccountName=devstoreaccount1;", "QueueEndpoint=" + inst.QueueEndpoint() + ";", "BlobEndpoint=" + inst.BlobEndpoint() + ";"} {
		if !strings.Contains(inst.ConnectionString(), want) {
			t.Errorf("connection string lacks %q", want)
		}
	}
	for _, ep := range []string{inst.QueueEndpoint(), inst.BlobEndpoint()} {
		code, err := get(ep)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusForbidden {
			t.Errorf("GET %s: status %d, want 403 (no auth)", ep, code)
		}
	}
	for range 50 {
		if _, err := get(inst.QueueEndpoint()); err != nil {
			t.Fatal(err)
		}
	}
	cpu, err := inst.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	if cpu <= 0 {
		t.Errorf("CPUTime = %v, want > 0", cpu)
	}
	t.Logf("CPUTime = %v", cpu)

	addr := hostPort(t, inst.QueueEndpoint())
	work := inst.workDir
	begin := time.Now()
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(begin))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("work dir %s not removed: %v", work, err)
	}
	if err := inst.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := inst.Kill(); err != nil {
		t.Errorf("Kill after Stop: %v", err)
	}
	if _, err := inst.CPUTime(); err == nil {
		t.Error("CPUTime after Stop: want error")
	}
}

func TestConcurrentInstances(t *testing.T) {
	SkipIfShort(t) // here, not just in the subtests, or the count below fails
	var mu sync.Mutex
	seen := map[string]string{}
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				inst := startFresh(t)
				if _, err := get(inst.QueueEndpoint()); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, ep := range []string{inst.QueueEndpoint(), inst.BlobEndpoint()} {
					hp := hostPort(t, ep)
					if other, dup := seen[hp]; dup {
						t.Errorf("%s used by both %s and %s", hp, other, name)
					}
					seen[hp] = name
				}
			})
		}
	})
	if len(seen) != 4 {
		t.Errorf("got %d distinct ports, want 4: %v", len(seen), seen)
	}
}

func TestKill(t *testing.T) {
	SkipIfShort(t)
	inst := startFresh(t)
	addr := hostPort(t, inst.QueueEndpoint())
	if err := inst.Kill(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Kill", addr)
	}
	if err := inst.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if err := inst.Stop(); err != nil {
		t.Errorf("Stop after Kill: %v", err)
	}
}

func TestForTestExternal(t *testing.T) {
	t.Setenv(EnvConnectionString, "UseDevelopmentStorage=true")
	inst := ForTest(t)
	if !inst.External() || inst.PID() != 0 {
		t.Fatalf("External()=%v PID()=%d, want external", inst.External(), inst.PID())
	}
	if got, want := inst.QueueEndpoint(), "http://127.0.0.1:10001/devstoreaccount1"; got != want {
		t.Errorf("QueueEndpoint = %q, want %q", got, want)
	}
	if _, err := inst.CPUTime(); err == nil {
		t.Error("CPUTime of external: want error")
	}
	if err := inst.Stop(); err != nil {
		t.Error(err)
	}
}

func TestExternalParsing(t *testing.T) {
	for _, tc := range []struct{ cs, account, key, queue, blob string }{
		{
			cs:      "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + devKey + ";BlobEndpoint=http://h:1/devstoreaccount1;QueueEndpoint=http://h:2/devstoreaccount1;",
			account: devAccount, key: devKey, queue: "http://h:2/devstoreaccount1", blob: "http://h:1/devstoreaccount1",
		},
		{
			cs:      "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5==;EndpointSuffix=core.chinacloudapi.cn",
			account: "acct", key: "a2V5==", queue: "https://acct.queue.core.chinacloudapi.cn", blob: "https://acct.blob.core.chinacloudapi.cn",
		},
		{
			cs:      "accountname=acct;accountkey=k",
			account: "acct", key: "k", queue: "https://acct.queue.core.windows.net", blob: "https://acct.blob.core.windows.net",
		},
	} {
		inst, err := external(tc.cs)
		if err != nil {
			t.Fatal(err)
		}
		if inst.AccountName() != tc.account || inst.AccountKey() != tc.key || inst.QueueEndpoint() != tc.queue || inst.BlobEndpoint() != tc.blob || inst.ConnectionString() != tc.cs {
			t.Errorf("external(%q) = %q %q %q %q", tc.cs, inst.AccountName(), inst.AccountKey(), inst.QueueEndpoint(), inst.BlobEndpoint())
		}
	}
	const secret = "AccountKey=c2VjcmV0;Foo=bar"
	if _, err := external(secret); err == nil {
		t.Error("want error without endpoint or account")
	} else if strings.Contains(err.Error(), "c2VjcmV0") {
		t.Error("error leaks the key")
	}
}

func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "install.lock")
	unlock1, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}

	// A second attempt (its own open file, as another process would have)
	// waits while the first holds the lock and gets it once released.
	type result struct {
		unlock func()
		err    error
	}
	second := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		u, err := lockFile(ctx, path)
		second <- result{u, err}
	}()
	select {
	case r := <-second:
		if r.unlock != nil {
			r.unlock()
		}
		unlock1()
		t.Fatalf("second lockFile returned (err %v) while the first held the lock", r.err)
	case <-time.After(4 * lockPoll): // long enough for several attempts
	}
	unlock1()
	var unlock2 func()
	select {
	case r := <-second:
		if r.err != nil {
			t.Fatalf("second lockFile after release: %v", r.err)
		}
		unlock2 = r.unlock
	case <-time.After(time.Minute):
		t.Fatal("second lockFile did not get the lock within a minute of its release")
	}

	// A ctx that ends while waiting gives up with its error.
	ctx, cancel := context.WithTimeout(context.Background(), 2*lockPoll)
	defer cancel()
	if u, err := lockFile(ctx, path); err == nil {
		u()
		unlock2()
		t.Fatal("lockFile got a held lock")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("lockFile with an ending ctx: %v, want context.DeadlineExceeded", err)
	}

	unlock2()
	u, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatalf("lockFile after all released: %v", err)
	}
	u()
}

// An emulator started with a clock offset reports its times on that clock
// from its first answer, and follows a change of it.
func TestAnEmulatorRunsOnAMovedClock(t *testing.T) {
	SkipIfShort(t)
	t.Parallel()
	inst, err := Start(t.Context(), &Options{ClockOffset: -5 * time.Hour})
	if err != nil {
		t.Fatalf("%v\n%s", err, HowTo)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	date := func() time.Time {
		resp, err := http.Get(inst.QueueEndpoint() + "?comp=list")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		d, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if off := time.Since(date()); off < 5*time.Hour-5*time.Second || off > 5*time.Hour+5*time.Second {
		t.Fatalf("the emulator's clock is %v behind, want 5h", off)
	}
	if err := inst.SetClockOffset(3 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		off := date().Sub(time.Now())
		if off > 3*24*time.Hour-5*time.Second && off < 3*24*time.Hour+5*time.Second {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emulator's clock is %v ahead after the move, want 72h", off)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
