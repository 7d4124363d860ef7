package azurite

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// npmFiles pins the exact Azurite dependency tree. It is embedded so that the
// harness works from any working directory (tests run in their package dir,
// the load-test program anywhere).
//
//go:embed npm/package.json npm/package-lock.json
var npmFiles embed.FS

// installMu serialises installs within one process. The file lock excludes
// other processes, but where flock is emulated with per-process fcntl locks
// (e.g. on NFS) it would not exclude a second goroutine of this process.
var installMu sync.Mutex

const (
	installTimeout = 10 * time.Minute
	markerName     = ".installed"
)

// entryPoint is the script started with node, relative to the install dir.
var entryPoint = filepath.Join("node_modules", "azurite", "dist", "src", "azurite.js")

// lockHash identifies the pinned dependency tree; it names the default cache
// dir and is written to the marker, so a changed lockfile forces a reinstall.
func lockHash() string {
	b, err := npmFiles.ReadFile("npm/package-lock.json")
	if err != nil {
		panic(err) // embedded at build time; cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

// cacheDir returns where the pinned Azurite lives.
func cacheDir() (string, error) {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return filepath.Abs(d)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("azurite: no user cache dir (set %s): %w", EnvCacheDir, err)
	}
	return filepath.Join(base, "azdispatch", "azurite-"+lockHash()), nil
}

// installed reports whether dir holds a complete install of this lockfile.
// The marker is written last, so an interrupted npm ci is never trusted.
func installed(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, entryPoint)); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, markerName))
	return err == nil && strings.TrimSpace(string(b)) == lockHash()
}

// lookTools checks for node and npm up front so the error says how to get
// them instead of a bare "executable file not found". On Windows LookPath
// honours PATHEXT, so "node" finds node.exe and "npm" finds npm.cmd.
func lookTools(names ...string) error {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("azurite: %s not found on PATH: %w\n%s", n, err, HowTo)
		}
	}
	return nil
}

// Install makes sure the pinned Azurite is installed in the cache dir and
// returns that dir. It is safe to call concurrently from goroutines and from
// separate processes (e.g. `go test ./...` running several test binaries).
func Install(ctx context.Context) (string, error) {
	if err := lookTools("node", "npm"); err != nil {
		return "", err
	}
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	if installed(dir) {
		return dir, nil
	}

	installMu.Lock()
	defer installMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if installed(dir) { // another process may have finished while we waited
		return dir, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	_ = os.Remove(filepath.Join(dir, markerName))
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, _ := npmFiles.ReadFile("npm/" + name)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", fmt.Errorf("azurite: %w", err)
		}
	}

	// Said once, on stderr: the first run of an example or a test spends
	// most of its time here, and silence would look like a hang.
	fmt.Fprintln(os.Stderr, "azdispatch: installing Azurite 3.37.0, the storage emulator, from npm (once; it may take a minute)")

	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	// --ignore-scripts: the only install script in the tree (protobufjs)
	// merely prints a version warning; skipping scripts keeps the install
	// hermetic and fast. --engine-strict=false: azurite@3.37.0 declares
	// node >= 22 but runs fine on 20, and a user's npmrc must not turn that
	// warning into a failure.
	//
	// On Windows "npm" is npm.cmd, which os/exec runs through cmd.exe. cmd.exe
	// parses its command line by its own rules, which os/exec's quoting does
	// not follow (see exec.Command); the arguments here are fixed words with
	// nothing to quote, so that is fine. Also on Windows, ctx ending kills
	// cmd.exe but not the node process running npm, which may run on to the
	// end; WaitDelay still bounds how long we wait for its output.
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--engine-strict=false")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	cmd.WaitDelay = 5 * time.Second // don't hang on pipes held by npm's children
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return "", fmt.Errorf("azurite: npm ci in %s failed: %w\nnpm output (tail):\n%s\n%s",
			dir, err, lastLines(dropEngineWarnings(string(out)), 50), HowTo)
	}
	if _, err := os.Stat(filepath.Join(dir, entryPoint)); err != nil {
		return "", fmt.Errorf("azurite: npm ci succeeded but %w\n%s", err, HowTo)
	}
	// Write the marker atomically so a concurrent reader never sees half of it.
	tmp := filepath.Join(dir, markerName+".tmp")
	if err := os.WriteFile(tmp, []byte(lockHash()+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, markerName)); err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	return dir, nil
}

// dropEngineWarnings removes npm's multi-line EBADENGINE warnings, which
// would otherwise push the actual error out of the tail we report.
func dropEngineWarnings(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "EBADENGINE") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
