package wire

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzText feeds Parse message text, which anyone who can send to the
// queue writes. Whatever it reads renders to the canonical form of the
// same parts, which renders as itself (a text a publisher wrote is in that
// form); a text without a due line or a pointer renders byte for byte; and
// on an error the parts read and the rest render the text back.
func FuzzText(f *testing.F) {
	meta, err := NewMeta(map[string]string{"traceparent": "00-x"})
	require.NoError(f, err)
	for _, s := range []string{
		"",
		`{"n":1}`,
		(&Text{Due: &DueLine{After: 700000, Hops: 1, Seen: 1}, Meta: meta, Pointer: aPointer}).Render(),
		(&Text{Due: &DueLine{At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, Body: "x"}).Render(),
		(&Text{Meta: meta, Body: `{"n":1}`}).Render(),
		DueMagic + `{"after":60, "later":[1, 2]}` + "\n" + MetaMagic + `{ "a":"\u003c" }` + "\n" + PointerMagic + ` {"KIND":"single","blob":"` + aPointer.Blob + `","size":1e1,"sha256":"` + aPointer.SHA256 + `","items":1}` + "\n",
		DueMagic + "{}\nbody",
		MetaMagic + "null\n" + PointerMagic,
		MetaMagic + "{oops\n",
		DueMagic + `{"after":1}` + "\n" + PoisonMagic + "{}\nbody",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		msg, err := Parse(text, Limits{})
		require.True(t, strings.HasSuffix(text, msg.Body), "the body is the text's end")
		canonical := msg.Render()
		if err != nil {
			require.Nil(t, msg.Pointer)
			if msg.Due == nil {
				require.Equal(t, text, canonical, "the parts read and the rest render the text back")
			}
			_, again := Parse(canonical, Limits{})
			require.ErrorIs(t, again, unwrapOnce(err), "the same part fails again")
			return
		}
		if msg.Due == nil && msg.Pointer == nil {
			require.Equal(t, text, canonical, "metadata and a body render byte for byte")
		}
		again, err := Parse(canonical, Limits{})
		require.NoError(t, err, "rendered as %q", canonical)
		require.Equal(t, canonical, again.Render(), "the canonical form renders as itself")
		assert.Equal(t, msg.Meta, again.Meta)
		assert.Equal(t, msg.Pointer, again.Pointer)
		assert.Equal(t, msg.Body, again.Body)
		require.Equal(t, msg.Due == nil, again.Due == nil)
		if msg.Due != nil {
			assert.True(t, msg.Due.At.Equal(again.Due.At))
			assert.Equal(t, []int64{msg.Due.After, msg.Due.Hops, msg.Due.Seen}, []int64{again.Due.After, again.Due.Hops, again.Due.Seen})
			assert.Equal(t, msg.Due.Occ, again.Due.Occ)
		}
	})
}

// unwrapOnce is the sentinel an error of Parse wraps.
func unwrapOnce(err error) error {
	for _, sentinel := range []error{ErrBadDueLine, ErrBadMetadata, ErrInvalidPointer} {
		if errors.Is(err, sentinel) {
			return sentinel
		}
	}
	return err
}

// FuzzRender builds texts as a publisher does, from their parts: each
// parses back to the parts it was rendered from, and renders as itself.
func FuzzRender(f *testing.F) {
	f.Add(int64(0), int64(0), "", "", `{"n":1}`, false)
	f.Add(int64(864000), int64(2), "traceparent", "00-x", "", true)
	f.Add(int64(60), int64(0), "k", "<v>\n", DueMagic+"not a line", false)
	f.Add(int64(-1), int64(-1), "", "v", "\xff", true)
	f.Fuzz(func(t *testing.T, after, hops int64, key, value, body string, pointer bool) {
		var want Text
		if after > 0 && after <= int64(MaxAfter/time.Second) {
			want.Due = &DueLine{After: after, Hops: max(hops, 0)}
		}
		var err error
		if !utf8.ValidString(key) || !utf8.ValidString(value) {
			return // written with U+FFFD for the bad bytes, as JSON does (see NewMeta)
		}
		if key != "" || value != "" {
			if want.Meta, err = NewMeta(map[string]string{key: value}); err != nil {
				require.ErrorIs(t, err, ErrBadMetadata)
				return
			}
		}
		if pointer {
			want.Pointer = aPointer
		} else if Marked(body) {
			return // a publisher offloads such a body
		} else {
			want.Body = body
		}
		text := want.Render()
		got, err := Parse(text, Limits{})
		require.NoError(t, err, "%q", text)
		assert.Equal(t, want.Due, got.Due)
		assert.Equal(t, want.Meta, got.Meta)
		assert.Equal(t, want.Pointer, got.Pointer)
		assert.Equal(t, want.Body, got.Body)
		assert.Equal(t, text, got.Render())
	})
}
