package dashboard

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestReasonShape(t *testing.T) {
	t.Parallel()
	cases := []struct{ reason, want string }{
		{"payment declined for order 17", "payment declined for order <n>"},
		{"payment declined for order 18", "payment declined for order <n>"},
		{"permanent: amount 12.50 over limit 1,000", "permanent: amount <n> over limit <n>"},
		{"customer 5f0c2a34-9b1e-4c55-8d3a-0e2f6b7c8d9e not found", "customer <id> not found"},
		{"blob 9f86d081884c7d65 missing", "blob <id> missing"},
		{"key ord_8Xk2LmQp9Zr refused", "key <id> refused"},
		{`field "email" is invalid`, `field "…" is invalid`},
		{`unknown status 'shipped-late' for order 4`, `unknown status '…' for order <n>`},
		{"can't parse: don't know", "can't parse: don't know"},
		{"“Müller” rejected", "“…” rejected"},
		{"timeout at 2026-11-27T15:47:57Z after 30s", "timeout at <time> after <n>s"},
		{"decode: line 3\n\tcolumn   9", "decode: line <n> column <n>"},
		{"order17 failed", "order<n> failed"},
		{"order1234 failed", "order<n> failed"},
		{"token a1b2c3 refused", "token <id> refused"},
		{"utf8 invalid", "utf<n> invalid"},
		{"deadlines exceeded", "deadlines exceeded"},
		{"  ", ""},
		{"bad byte \xff here", "bad byte \uFFFD here"},
		{"arabic digits ٣٤", "arabic digits ##"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, reasonShape(c.reason), "%q", c.reason)
	}
	long := reasonShape(strings.Repeat("word ", 100))
	assert.LessOrEqual(t, len(long), maxShape)
	assert.True(t, strings.HasSuffix(long, "…"))
}

// Reasons made from one template with random values have one shape.
func TestReasonShapeGroupsRandomValues(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	templates := []string{
		"payment declined for order %d",
		"customer %s not found (attempt %d)",
		`field "%s" rejected at %s`,
		"blob %s: %d bytes over %d",
	}
	guid := func() string {
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	}
	word := func() string {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = "abcdefghij klmnop-_.,:0123456789"[rng.IntN(32)]
		}
		return string(b)
	}
	stamp := func() string {
		return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02dZ", 2000+rng.IntN(100), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60))
	}
	make := []func() string{
		func() string { return fmt.Sprintf(templates[0], rng.IntN(1_000_000)) },
		func() string { return fmt.Sprintf(templates[1], guid(), 1+rng.IntN(9)) },
		func() string { return fmt.Sprintf(templates[2], word(), stamp()) },
		func() string {
			return fmt.Sprintf(templates[3], fmt.Sprintf("%x", rng.Uint64()|1<<60), rng.IntN(1<<20), rng.IntN(1<<20))
		},
	}
	for i, mk := range make {
		first := reasonShape(mk())
		for range 200 {
			r := mk()
			assert.Equal(t, first, reasonShape(r), "template %d: %q", i, r)
		}
	}
}

func FuzzReasonShape(f *testing.F) {
	for _, s := range []string{"payment declined for order 17", `a "b" 'c' “d” 2026-01-01`, "x 'y z'w", "''", `""'"`, "٣", strings.Repeat("'a' ", 60)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reason string) {
		s := reasonShape(reason)
		if !utf8.ValidString(s) {
			t.Fatalf("not UTF-8: %q", s)
		}
		if len(s) > maxShape {
			t.Fatalf("%d bytes: %q", len(s), s)
		}
		if strings.ContainsFunc(s, unicode.IsDigit) {
			t.Fatalf("a digit left: %q", s)
		}
		if again := reasonShape(s); again != s {
			t.Fatalf("not idempotent:\n%q\n%q", s, again)
		}
	})
}
