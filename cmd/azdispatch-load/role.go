package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// childRole is a part this binary plays in a child process (see child).
// The coordinator gives the role its configuration, JSON, in one
// environment variable, whose presence makes the binary take the part,
// and the connection string in another, rather than on the command line,
// where process listings would show the key.
type childRole struct {
	name   string // in its error messages: "chaos worker"
	config string // the variable holding the configuration
	conn   string // the variable holding the connection string
}

// env is the environment the coordinator adds for a child in the role.
func (role childRole) env(cfg any, connectionString string) ([]string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return []string{role.config + "=" + string(b), role.conn + "=" + connectionString}, nil
}

// runRole plays the role this process's environment names, if any, and
// returns its exit code; ok is false in the coordinator, which names none.
// Both the program and its tests, which run their own binary as the
// child, start here.
func runRole() (code int, ok bool) {
	if raw := os.Getenv(chaosRole.config); raw != "" {
		return roleMain(chaosRole, raw, runChaosWorker), true
	}
	if raw := os.Getenv(scheduleRole.config); raw != "" {
		return roleMain(scheduleRole, raw, runScheduleWorker), true
	}
	if raw := os.Getenv(keysRole.config); raw != "" {
		return roleMain(keysRole, raw, runKeysWorker), true
	}
	if raw := os.Getenv(groupsRole.config); raw != "" {
		return roleMain(groupsRole, raw, runGroupsWorker), true
	}
	if raw := os.Getenv(queuePauseRole.config); raw != "" {
		return roleMain(queuePauseRole, raw, runQueuePauseWorker), true
	}
	return 0, false
}

// roleMain runs a role on this process's stdin and stdout with its
// configuration raw, and returns its exit code: 2 for a configuration
// that does not read, 1 for a run that failed.
func roleMain[C any](role childRole, raw string, run func(cfg C, connectionString string, commands io.Reader, reports io.Writer) error) int {
	var cfg C
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, role.name+": bad configuration:", err)
		return 2
	}
	// A Ctrl-C at the terminal reaches the whole process group: the
	// coordinator, which owns this process, stops it through stdin.
	signal.Ignore(os.Interrupt)
	if err := run(cfg, os.Getenv(role.conn), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, role.name+":", err)
		return 1
	}
	return 0
}
