package main

import (
	"flag"
	"strconv"
)

// A flag that takes one value may be given once. The flag package keeps
// the last of several silently, so "peek -n 5 … -n 1" (a script that adds a
// flag to a line that has it) would show one message and say nothing of
// the 5. A switch given twice with the same meaning (-json … -json) loses
// nothing and passes; -write … -write=false is refused. Flags that take several values (-account-env, -account-url, and the
// targets of commands that take several) are lists, marked repeatable.

// repeatable is a flag.Value that keeps every value it is given.
type repeatable interface{ repeatable() }

// onceValue wraps a flag's value, refusing a second Set.
type onceValue struct {
	flag.Value
	name     string
	first    string
	given    bool
	repeated *error // where the refusal is kept, for parse to report as it is
}

func (v *onceValue) Set(s string) error {
	if v.given && v.IsBoolFlag() && sameBool(v.first, s) {
		return nil // a switch said twice (-json … -json) means one thing
	}
	if v.given {
		*v.repeated = usageErrorf("-%s given twice (%q, then %q): it takes one value", v.name, v.first, s)
		return *v.repeated
	}
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.given, v.first = true, s
	return nil
}

// IsBoolFlag keeps a boolean flag usable without a value (-json).
func (v *onceValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// giveOnce makes every flag of fs that is not repeatable refuse a second
// value; a refusal is stored in *repeated.
func giveOnce(fs *flag.FlagSet, repeated *error) {
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Value.(type) {
		case repeatable, *onceValue:
			return
		}
		f.Value = &onceValue{Value: f.Value, name: f.Name, repeated: repeated}
	})
}

// unwrapOnce restores the flags' own values, for PrintDefaults, which
// reads a flag's zero value from its type.
func unwrapOnce(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if o, ok := f.Value.(*onceValue); ok {
			f.Value = o.Value
		}
	})
}

// String is the wrapped value's, or "" for the zero onceValue.
func (v *onceValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

// sameBool reports whether two values of a boolean flag mean the same.
func sameBool(a, b string) bool {
	x, errA := strconv.ParseBool(a)
	y, errB := strconv.ParseBool(b)
	return errA == nil && errB == nil && x == y
}
