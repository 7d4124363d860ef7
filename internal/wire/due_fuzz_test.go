package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzCutDue feeds CutDue message text, which anyone who can send to the
// queue writes. A line it accepts makes sense and encodes back to a line
// that parses to the same due time and counts; what it refuses it leaves
// whole.
func FuzzCutDue(f *testing.F) {
	for _, s := range []string{
		(&DueLine{After: 700000, Hops: 1, Seen: 1}).Encode() + "{}",
		DueMagic + `{"at":"2030-01-01T00:00:00Z"}` + "\n",
		DueMagic + `{"at":"2030-01-01T00:00:00+05:00","hops":2}` + "\nx",
		DueMagic + `{"after":1e3}` + "\n",
		DueMagic + `null` + "\n",
		DueMagic,
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		l, rest, err := CutDue(text)
		if err != nil || l == nil {
			require.Equal(t, text, rest)
			return
		}
		require.True(t, strings.HasSuffix(text, rest))
		again, rest2, err := CutDue(l.Encode() + rest)
		require.NoError(t, err)
		require.Equal(t, rest, rest2)
		require.True(t, again.At.Equal(l.At))
		require.Equal(t, []int64{l.After, l.Hops, l.Seen}, []int64{again.After, again.Hops, again.Seen})
	})
}
