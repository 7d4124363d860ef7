package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Exit codes, as the help and the README document them.
const (
	exitOK        = 0 // done; nothing needs attention
	exitFailed    = 1 // a storage request, or the operation, failed
	exitUsage     = 2 // the command line was wrong, or a purge was not confirmed
	exitAttention = 3 // done, and it found something to look at: poison messages, (dry run) payloads to sweep, a group not complete
)

// usageError is a mistake in the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// errAttention ends a command that succeeded and found something that needs
// a person's attention (exit 3). Nothing is printed for it.
var errAttention = errors.New("attention")

// exitCode maps a command's error to the process's exit code.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errAttention):
		return exitAttention
	case errors.As(err, &ue), errors.Is(err, azdispatch.ErrInvalidConfig):
		return exitUsage
	}
	return exitFailed
}

// emit prints a command's one result: with asJSON one JSON document,
// otherwise the table that table writes, for people.
func (c *cli) emit(asJSON bool, doc any, table func(tw *tabwriter.Writer)) error {
	c.emitted = true
	if asJSON {
		return writeJSON(c.stdout, doc)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

func writeJSON(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// errorDoc is what -json prints when a command fails before it has a result.
type errorDoc struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// row writes one tab-separated line.
func row(tw io.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(tw, strings.Join(parts, "\t"))
}

// stamp formats a time for a table: UTC to the second, "-" when unknown.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// preview shortens text for a table cell, quoting it so that newlines, tabs
// and trailing spaces show.
func preview(s string, max int) string {
	cut := false
	if len(s) > max {
		s = xmltext.TruncateUTF8(s, max)
		cut = true
	}
	q := strconv.Quote(s)
	if cut {
		q += "…"
	}
	return q
}

// oneLine returns s as it is if it fits on a table's line, and quoted if it
// holds a tab, a line break or another control character.
func oneLine(s string) string {
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}
