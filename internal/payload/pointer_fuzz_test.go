package payload

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/allocs"
)

// FuzzParsePointer feeds ParsePointer message text, which anyone who can
// send to the queue writes. A pointer it accepts is within the limits and
// names nothing but an id; it encodes back to text that parses to the same
// pointer; and text it refuses costs little, however long it is.
func FuzzParsePointer(f *testing.F) {
	id, sum := strings.Repeat("0f", 16), strings.Repeat("ab", 32)
	valid := `{"kind":"batch","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`
	for _, s := range []string{
		Magic + valid,
		(&Pointer{Kind: KindSingle, Blob: id, Size: 1, SHA256: sum, Items: 1}).Encode(),
		Magic + ` ` + valid + "\n\t ",
		Magic + strings.Replace(valid, `"kind"`, `"KIND"`, 1),                 // json matches names in any case
		Magic + strings.Replace(valid, `"items":2`, `"items":2,"items":3`, 1), // duplicate name: the last wins
		Magic + strings.Replace(valid, `"kind"`, `"container":"x","kind"`, 1),
		Magic + strings.Replace(valid, `"size":10`, `"size":1e1`, 1),
		Magic + strings.Replace(valid, `"size":10`, `"size":9223372036854775808`, 1),
		Magic + valid + `{}`,
		Magic + `null`,
		Magic,
		strings.TrimSpace(Magic) + valid,
		"",
	} {
		f.Add(s)
	}
	lim := Limits{MaxBlobSize: 1 << 20, MaxExpandedSize: 1 << 20, MaxItemSize: 1 << 10, MaxItems: 1000}
	f.Fuzz(func(t *testing.T, text string) {
		// Not parallel: other work would count in the allocation bound.
		var p *Pointer
		var err error
		spent := allocs.Bytes(func() { p, err = ParsePointer(text, lim) })
		// A refusal (the usual fate of long text) allocates its error only;
		// an acceptance, the decoding of at most MaxPointerText bytes.
		assert.Less(t, spent, uint64(8*MaxPointerText+16<<10), "allocated for %d bytes of text", len(text))
		if err != nil {
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrInvalidPointer)
			// The error becomes a poison envelope's reason: it stays short.
			assert.LessOrEqual(t, len(err.Error()), 4*MaxPointerText+200)
			unlimited, uerr := ParsePointer(text, Unlimited())
			if uerr == nil {
				// Only the limits refused it.
				assert.True(t, unlimited.Size > lim.MaxBlobSize || unlimited.Items > lim.MaxItems, "%+v", unlimited)
			}
			return
		}
		require.NotNil(t, p)
		assert.True(t, IsPointer(text))
		assert.LessOrEqual(t, len(text), MaxPointerText)
		assert.Contains(t, []string{KindBatch, KindSingle}, p.Kind)
		assert.True(t, IsLowerHex(p.Blob, BlobIDLen), "blob %q", p.Blob)
		assert.True(t, IsLowerHex(p.SHA256, sha256Len), "sha256 %q", p.SHA256)
		assert.True(t, p.Size >= 1 && p.Size <= lim.MaxBlobSize, "size %d", p.Size)
		assert.True(t, p.Items >= 1 && p.Items <= lim.MaxItems, "items %d", p.Items)
		if p.Kind == KindSingle {
			assert.Equal(t, 1, p.Items)
		}

		again := p.Encode()
		assert.LessOrEqual(t, len(again), MaxPointerText)
		q, err := ParsePointer(again, lim)
		require.NoError(t, err, "re-encoded as %q", again)
		assert.Equal(t, p, q)
		assert.Equal(t, again, q.Encode(), "the encoding is canonical")

		// Wider limits accept what narrower ones do, as the same pointer.
		u, err := ParsePointer(text, Unlimited())
		require.NoError(t, err)
		assert.Equal(t, p, u)
	})
}
