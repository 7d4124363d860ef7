package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/azdispatch/azdispatch"
)

// defaultAccountEnv is the variable read for the connection string when no
// -account-env or -account-url is given: the Azure CLI's own, which the
// library's examples read too.
const defaultAccountEnv = "AZURE_STORAGE_CONNECTION_STRING"

// listFlag is a flag that may be repeated, keeping every value in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
func (l *listFlag) repeatable()        {}

// targetSpec is one target as the command line names it: a queue (-queue),
// a sharded set (-base), whose shard count is the -shards of the same rank
// among the -shards given, or a queue set (-prefix).
type targetSpec struct {
	name    string
	sharded bool
	prefix  bool
}

// prefixFlag is -prefix: each value is one more queue set.
type prefixFlag struct{ specs *[]targetSpec }

func (p prefixFlag) String() string {
	if p.specs == nil {
		return ""
	}
	var names []string
	for _, t := range *p.specs {
		if t.prefix {
			names = append(names, t.name)
		}
	}
	return strings.Join(names, ",")
}

func (p prefixFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("empty: every queue of the account would be in the set")
	}
	*p.specs = append(*p.specs, targetSpec{name: v, prefix: true})
	return nil
}
func (prefixFlag) repeatable() {}

// specFlag is -queue or -base: each value is one more target, kept in the
// order given, so that a dashboard shows them in that order.
type specFlag struct {
	specs   *[]targetSpec
	sharded bool
}

func (s specFlag) String() string {
	if s.specs == nil {
		return ""
	}
	var names []string
	for _, t := range *s.specs {
		if t.sharded == s.sharded && !t.prefix {
			names = append(names, t.name)
		}
	}
	return strings.Join(names, ",")
}

func (s specFlag) Set(v string) error {
	*s.specs = append(*s.specs, targetSpec{name: v, sharded: s.sharded})
	return nil
}
func (specFlag) repeatable() {}

// intListFlag is -shards: repeated, the i-th goes with the i-th -base.
type intListFlag []int

func (l *intListFlag) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intListFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	*l = append(*l, n)
	return nil
}
func (l *intListFlag) repeatable() {}

// targetFlags say which queues (or sharded sets) a command works on and
// which accounts hold them. Credentials never come from a flag's value,
// which a shell history or a process listing would show: only from the
// environment, or from Microsoft Entra ID with -account-url.
//
// -queue, -base and -shards are collected as lists whatever the command, so
// that a repeated one is refused with a message of its own (see check)
// rather than the last kept: only a command that takes several targets
// (depth, dashboard) accepts several. The others act on one queue or set
// (send, peek, poison, sweep, schedules): several would mean a send to
// which, or a purge of what, which a flag repeated by mistake must not
// decide.
type targetFlags struct {
	command          string // "azdispatch depth", for messages
	several          bool   // the command takes several targets
	specs            []targetSpec
	shards           intListFlag
	accountEnv       listFlag
	accountURL       listFlag
	payloadContainer string
	retries          int
}

func (f *targetFlags) register(fs *flag.FlagSet) {
	f.command = fs.Name()
	if f.several {
		fs.Var(specFlag{&f.specs, false}, "queue", "the `name` of a queue; repeat for several (in one account)")
		fs.Var(specFlag{&f.specs, true}, "base", "the base `name` of a sharded set: queues <base>-0 … <base>-(N-1); repeat for several sets, each with its -shards")
		fs.Var(&f.shards, "shards", "how many shards (`N`) the set named by -base has, checked against the queues that exist; with several -base, one -shards for each, in the same order")
		fs.Var(prefixFlag{&f.specs}, "prefix", "a queue set: every queue of the first account whose name starts with `prefix` (poison queues left out), each shown on its own; repeat for several")
	} else {
		fs.Var(specFlag{&f.specs, false}, "queue", "the `name` of one queue")
		fs.Var(specFlag{&f.specs, true}, "base", "the base `name` of a sharded set: queues <base>-0 … <base>-(N-1)")
		fs.Var(&f.shards, "shards", "how many shards (`N`) the set named by -base has, checked against the queues that exist")
	}
	fs.Var(&f.accountEnv, "account-env", "an environment `variable` holding an account's connection string; repeat for a set over several accounts, in order (default "+defaultAccountEnv+")")
	fs.Var(&f.accountURL, "account-url", "an account's queue service `URL` (https://<account>.queue.core.windows.net), signed in with DefaultAzureCredential; repeat for several accounts")
	fs.StringVar(&f.payloadContainer, "payload-container", azdispatch.DefaultPayloadContainer, "the blob `container` of offloaded payloads, in the first account")
	fs.IntVar(&f.retries, "retries", 3, "SDK retries of a failed request (0 for none)")
}

// queues and bases are the names given with -queue and with -base.
func (f *targetFlags) queues() []string { return f.names(false) }
func (f *targetFlags) bases() []string  { return f.names(true) }

func (f *targetFlags) names(sharded bool) []string {
	var out []string
	for _, s := range f.specs {
		if s.sharded == sharded && !s.prefix {
			out = append(out, s.name)
		}
	}
	return out
}

// check refuses, before any request, a command line whose targets do not
// add up: nothing named where a queue is needed, a flag repeated by a
// command that takes one target, or -base and -shards that do not pair.
func (f *targetFlags) check(need queueRequired) error {
	queues, bases := f.queues(), f.bases()
	if !f.several {
		for _, r := range []struct {
			flag   string
			values []string
		}{{"queue", queues}, {"base", bases}, {"shards", strings.Split(f.shards.String(), ",")}} {
			if len(r.values) > 1 {
				return usageErrorf("-%s given %d times (%s): %s works on one queue or set and takes one; only depth and dashboard take several targets",
					r.flag, len(r.values), strings.Join(r.values, ", "), f.command)
			}
		}
		if len(queues) > 0 && len(bases) > 0 {
			return usageErrorf("give -queue or -base, not both")
		}
	}
	switch {
	case bool(need) && len(f.specs) == 0 && f.several:
		return usageErrorf("name a queue with -queue, a sharded set with -base and -shards, or a queue set with -prefix")
	case bool(need) && len(f.specs) == 0:
		return usageErrorf("name a queue with -queue, or a sharded set with -base and -shards")
	case len(f.shards) > 0 && len(bases) == 0:
		return usageErrorf("-shards needs -base")
	case bool(need) && len(bases) > 0 && len(f.shards) == 0:
		return usageErrorf("-base needs -shards, 1 or more")
	case len(f.shards) > 0 && len(f.shards) != len(bases):
		return usageErrorf("%d -base and %d -shards: give one -shards for each -base, in the same order", len(bases), len(f.shards))
	case len(f.accountEnv) > 0 && len(f.accountURL) > 0:
		return usageErrorf("give accounts with -account-env or with -account-url, not both")
	case f.retries < 0:
		return usageErrorf("-retries must not be negative")
	}
	for _, n := range f.shards {
		if n < 1 {
			return usageErrorf("-shards %d: a set has 1 shard or more", n)
		}
	}
	return nil
}
