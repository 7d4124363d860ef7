package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// errHelp ends a command whose help was asked for (exit 0).
var errHelp = errors.New("help requested")

// common are the flags every command has.
type common struct {
	target  targetFlags
	json    bool
	timeout time.Duration
}

// flagSet returns the flag set of a command, whose -h prints synopsis, about,
// the flags and the common help.
func (c *cli) flagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("azdispatch "+name, flag.ContinueOnError)
	// The flag package's own error lines are dropped: finish prints the
	// error once, redacted.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage: azdispatch %s\n\n%s\n\nFlags:\n", synopsis, about)
		unwrapOnce(fs)
		fs.SetOutput(c.stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprint(c.stderr, commonHelp)
	}
	return fs
}

func (o *common) register(fs *flag.FlagSet) {
	o.target.register(fs)
	fs.BoolVar(&o.json, "json", false, "print one JSON document instead of a table (on failure: {\"error\": …, \"exit_code\": …})")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
}

// withTimeout bounds a command's storage work.
func (o *common) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, o.timeout)
}

// parse parses args, letting flags and positional arguments come in any
// order (the flag package alone stops at the first argument); after "--"
// everything is an argument. It returns the positional arguments.
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	var repeated error
	giveOnce(fs, &repeated)
	defer func() {
		if f := fs.Lookup("json"); f != nil {
			c.json = f.Value.String() == "true"
		}
	}()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp // the flag package has printed the usage
			}
			if repeated != nil {
				return nil, fmt.Errorf("%w (run %s -h for help)", repeated, fs.Name())
			}
			return nil, usageErrorf("%w (run %s -h for help)", err, fs.Name())
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// noArgs refuses positional arguments a command does not take.
// parseNoArgs parses the flags of a command that takes no arguments.
func (c *cli) parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	return noArgs(fs, pos)
}

func noArgs(fs *flag.FlagSet, pos []string) error {
	if len(pos) > 0 {
		return usageErrorf("%s takes no arguments, got %q", fs.Name(), pos)
	}
	return nil
}
