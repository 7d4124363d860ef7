package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A flag that takes one value, given twice, is refused (exit 2) before any
// request, naming both values, instead of the last kept silently; targets
// repeat only where a command takes several (depth, dashboard), and there -base
// and -shards must pair. No emulator: nothing is asked of storage, and the
// account named is one that nothing answers for.
func TestARepeatedFlagIsRefused(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"send", "-queue", "orders", "text", "-queue", "invoices"}, "-queue given 2 times (orders, invoices): azdispatch send works on one queue or set and takes one; only depth and dashboard take several targets"},
		{[]string{"poison", "purge", "-yes", "-queue", "orders", "-queue", "invoices"}, "-queue given 2 times (orders, invoices)"},
		{[]string{"peek", "-base", "a", "-shards", "2", "-base", "b", "-shards", "2"}, "-base given 2 times (a, b)"},
		{[]string{"peek", "-base", "a", "-shards", "2", "-shards", "3"}, "-shards given 2 times (2, 3)"},
		{[]string{"depth", "-base", "a", "-shards", "2", "-shards", "3"}, "1 -base and 2 -shards: give one -shards for each -base"},
		{[]string{"poison", "list", "-queue", "orders", "-base", "b", "-shards", "2"}, "give -queue or -base, not both"},
		{[]string{"peek", "-queue", "orders", "-n", "1", "-n", "2"}, `-n given twice ("1", then "2"): it takes one value`},
		{[]string{"depth", "-queue", "orders", "-timeout", "1m", "-timeout", "2m"}, `-timeout given twice ("1m", then "2m")`},
		{[]string{"dashboard", "-queue", "orders", "-write", "-write=false"}, `-write given twice ("true", then "false")`},
		// A switch said twice means one thing: what fails is the -queue.
		{[]string{"send", "-queue", "orders", "-json", "-ttl", "1h", "-json", "-queue", "other", "text"}, "-queue given 2 times (orders, other)"},
		{[]string{"dashboard", "-base", "a", "-base", "b", "-shards", "2"}, "2 -base and 1 -shards: give one -shards for each -base, in the same order"},
		{[]string{"dashboard", "-queue", "orders", "-addr", "127.0.0.1:0", "-addr", "127.0.0.1:1"}, `-addr given twice ("127.0.0.1:0", then "127.0.0.1:1")`},
	} {
		r := run(t, env, "", c.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", c.args, r)
		assert.Contains(t, r.stderr, c.says, "%v", c.args)
	}
	var doc errorDoc
	runJSON(t, env, exitUsage, &doc, "send", "-queue", "orders", "-queue", "invoices", "text")
	assert.Contains(t, doc.Error, "-queue given 2 times")
}
