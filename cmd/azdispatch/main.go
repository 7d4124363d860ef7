// Command azdispatch is an operator's tool for the queues of azdispatch: it
// shows their depth and their messages, sends a message, lists, shows,
// requeues and purges poisoned messages, sweeps orphaned payloads, and lists
// the schedules of schedulers.
//
//	go install github.com/azdispatch/azdispatch/cmd/azdispatch@latest
//	azdispatch help
//
// Credentials come from the environment, never from a flag: a connection
// string in AZURE_STORAGE_CONNECTION_STRING (or the variables that
// -account-env names), or Microsoft Entra ID through DefaultAzureCredential
// with -account-url. No output, and no error, shows a key or a signature.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, terminal: stdinIsTerminal}
	code := c.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// cli is one run of the command, with its streams and environment.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	terminal       func() bool // whether a person can answer a prompt on stdin
	red            redactor

	json    bool // -json was given: a failure is reported as a JSON document too
	emitted bool // the command printed its result
}

// command is one subcommand: it parses its own flags from args.
type command struct {
	name, summary string
	run           func(ctx context.Context, c *cli, args []string) error
}

func commands() []command {
	return []command{
		{"depth", "approximate depth of a queue or sharded set, and of its poison queues", runDepth},
		{"peek", "show messages at the front of the queue without receiving them", runPeek},
		{"send", "send a text (argument or stdin), claim-checked when too large", runSend},
		{"poison", "list, show, requeue or purge poisoned messages", runPoison},
		{"pause", "pause every listener of a queue for a while (-for), or show the pause (-status)", runPause},
		{"resume", "end the pause of a queue: its listeners receive again", runResume},
		{"sweep", "find (dry run) or delete (-apply) orphaned payload blobs", runSweep},
		{"schedules", "list the schedules of schedulers: next and last occurrence, sent by whom, counts", runSchedules},
		{"status", "what became of a group of messages (-group) or a tracked message (-token)", runStatus},
		{"dashboard", "serve the web dashboard (read-only unless -write) on 127.0.0.1:8080", runDashboard},
	}
}

// run runs the command line args and returns the exit code.
func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		c.usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == args[0] {
			err := cmd.run(ctx, c, args[1:])
			return c.finish(err)
		}
	}
	c.usage()
	return c.finish(usageErrorf("unknown command %q", args[0]))
}

// finish prints err, redacted, and returns its exit code.
func (c *cli) finish(err error) int {
	if errors.Is(err, errHelp) {
		return exitOK
	}
	code := exitCode(err)
	if err == nil || errors.Is(err, errAttention) {
		return code
	}
	// The library's errors already start with the package's name.
	msg := strings.TrimPrefix(c.red.redact(err.Error()), "azdispatch: ")
	fmt.Fprintln(c.stderr, "azdispatch:", msg)
	if c.json && !c.emitted {
		_ = writeJSON(c.stdout, errorDoc{Error: msg, ExitCode: code})
	}
	return code
}

func (c *cli) usage() {
	var b strings.Builder
	b.WriteString("Usage: azdispatch <command> [flags] [arguments]\n\nCommands:\n")
	width := 0
	for _, cmd := range commands() {
		width = max(width, len(cmd.name))
	}
	for _, cmd := range commands() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, cmd.name, cmd.summary)
	}
	b.WriteString("\nRun azdispatch <command> -h for its flags.\n")
	b.WriteString(commonHelp)
	fmt.Fprint(c.stderr, b.String())
}

// commonHelp ends every help text.
const commonHelp = `
Target: -queue NAME (one queue), or -base NAME -shards N (queues NAME-0 … NAME-(N-1),
spread over the accounts given, shard i in account i mod the number of accounts).
-shards is checked against the shards that exist, listed with one request per account:
if NAME-i exists for an i ≥ N, or the last shard that exists comes before NAME-(N-1), the
command fails (exit 2) naming both counts, rather than leave shards out or show queues that
do not exist; a shard below the last that was never created is shown as missing. Where
the accounts' queues cannot be listed (no permission to), stderr says so and the command
goes on without the check. Each command takes one target, except depth and dashboard:
repeat -queue, or -base with its own -shards each (the first -shards goes with the first
-base). Any other flag that takes one value may be given once (-account-env and
-account-url repeat, for several accounts).
Credentials come only from the environment: -account-env VAR (repeatable; default
AZURE_STORAGE_CONNECTION_STRING) names variables holding connection strings; or
-account-url URL (repeatable) signs in with DefaultAzureCredential. Nothing printed
ever shows a key or a SAS signature.

Output: a table, or one JSON document with -json (on failure: {"error", "exit_code"}).
Exit codes: 0 ok; 1 a storage request or the operation failed; 2 usage error (or a
purge not confirmed); 3 done, and found something to look at (poison list: poisoned
messages; sweep dry run: payloads to delete).
`

// stdinIsTerminal reports whether a person can answer a prompt on stdin.
// Not os.ModeCharDevice: /dev/null is a character device too, and a purge
// run with stdin from it must not take its empty answer for a person's.
func stdinIsTerminal() bool { return term.IsTerminal(int(os.Stdin.Fd())) }
