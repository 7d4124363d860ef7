package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/allocs"
)

// FuzzParsePointer feeds parsePointer message text, which anyone who can
// send to the queue writes. A pointer it accepts is within the limits and
// names nothing but an id; it encodes back to text that parses to the same
// pointer; and text it refuses costs little, however long it is.
func FuzzParsePointer(f *testing.F) {
	id, sum := strings.Repeat("0f", 16), strings.Repeat("ab", 32)
	valid := `{"kind":"batch","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`
	for _, s := range []string{
		PointerMagic + valid,
		(&Pointer{Kind: KindSingle, Blob: id, Size: 1, SHA256: sum, Items: 1}).Encode(),
		PointerMagic + ` ` + valid + "\n\t ",
		PointerMagic + strings.Replace(valid, `"kind"`, `"KIND"`, 1),                 // json matches names in any case
		PointerMagic + strings.Replace(valid, `"items":2`, `"items":2,"items":3`, 1), // duplicate name: the last wins
		PointerMagic + strings.Replace(valid, `"kind"`, `"container":"x","kind"`, 1),
		PointerMagic + strings.Replace(valid, `"size":10`, `"size":1e1`, 1),
		PointerMagic + strings.Replace(valid, `"size":10`, `"size":9223372036854775808`, 1),
		PointerMagic + valid + `{}`,
		PointerMagic + `null`,
		PointerMagic,
		strings.TrimSpace(PointerMagic) + valid,
		"",
	} {
		f.Add(s)
	}
	lim := Limits{MaxBlobSize: 1 << 20, MaxExpandedSize: 1 << 20, MaxItems: 1000}
	f.Fuzz(func(t *testing.T, text string) {
		// Not parallel: other work would count in the allocation bound.
		var p *Pointer
		var err error
		spent := allocs.Bytes(func() { p, err = parsePointer(text, lim) })
		// A refusal (the usual fate of long text) allocates its error only;
		// an acceptance, the decoding of at most MaxPointerText bytes.
		assert.Less(t, spent, uint64(8*MaxPointerText+16<<10), "allocated for %d bytes of text", len(text))
		if err != nil {
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrInvalidPointer)
			// The error becomes a poison envelope's reason: it stays short.
			assert.LessOrEqual(t, len(err.Error()), 4*MaxPointerText+200)
			unlimited, uerr := parsePointer(text, Limits{})
			if uerr == nil {
				// Only the limits refused it.
				assert.True(t, unlimited.Size > lim.MaxBlobSize || unlimited.Items > lim.MaxItems, "%+v", unlimited)
			}
			return
		}
		require.NotNil(t, p)
		assert.True(t, strings.HasPrefix(text, PointerMagic))
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
		q, err := parsePointer(again, lim)
		require.NoError(t, err, "re-encoded as %q", again)
		assert.Equal(t, p, q)
		assert.Equal(t, again, q.Encode(), "the encoding is canonical")

		// Wider limits accept what narrower ones do, as the same pointer.
		u, err := parsePointer(text, Limits{})
		require.NoError(t, err)
		assert.Equal(t, p, u)
	})
}
