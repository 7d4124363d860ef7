package wire

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aPointer is a valid pointer, in its canonical text.
var aPointer = &Pointer{Kind: KindSingle, Blob: strings.Repeat("0f", 16), Size: 10, SHA256: strings.Repeat("ab", 32), Items: 1}

func TestATextRendersAsItParses(t *testing.T) {
	t.Parallel()
	meta, err := NewMeta(map[string]string{"traceparent": "00-x", "k": "<v>"})
	require.NoError(t, err)
	due := &DueLine{At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Hops: 1, Seen: 2}
	for name, want := range map[string]Text{
		"a body alone":            {Body: `{"n":1}`},
		"an empty body":           {},
		"a due line":              {Due: due, Body: `{"n":1}`},
		"metadata":                {Meta: meta, Body: "body"},
		"all lines and a pointer": {Due: &DueLine{After: 60}, Meta: meta, Pointer: aPointer},
		"a pointer alone":         {Pointer: aPointer},
	} {
		text := want.Render()
		got, err := Parse(text, Limits{})
		require.NoError(t, err, name)
		assert.Equal(t, want.Meta, got.Meta, name)
		assert.Equal(t, want.Pointer, got.Pointer, name)
		assert.Equal(t, want.Body, got.Body, name)
		if want.Due != nil {
			require.NotNil(t, got.Due, name)
			assert.True(t, want.Due.At.Equal(got.Due.At), name)
			assert.Equal(t, []int64{want.Due.After, want.Due.Hops, want.Due.Seen}, []int64{got.Due.After, got.Due.Hops, got.Due.Seen}, name)
		}
		assert.Equal(t, text, got.Render(), "%s: canonical", name)
	}
}

func TestTheLinesComeInOrder(t *testing.T) {
	t.Parallel()
	text := `azdispatch-due/1 {"after":60}` + "\n" + `azdispatch-meta/1 {"a":"1"}` + "\n" + aPointer.Encode()
	got, err := Parse(text, Limits{})
	require.NoError(t, err)
	assert.Equal(t, int64(60), got.Due.After)
	assert.Equal(t, map[string]string{"a": "1"}, got.Meta.Pairs())
	assert.Equal(t, aPointer, got.Pointer)
	assert.Empty(t, got.Body)
	assert.Equal(t, `azdispatch-due/1 {"after":60}`+"\n"+`azdispatch-meta/1 {"a":"1"}`+"\n", got.Head())

	// Out of order, a line is the body: a publisher offloads such a body.
	swapped := `azdispatch-meta/1 {"a":"1"}` + "\n" + `azdispatch-due/1 {"after":60}` + "\nx"
	got, err = Parse(swapped, Limits{})
	require.NoError(t, err)
	assert.Nil(t, got.Due)
	assert.Equal(t, `azdispatch-due/1 {"after":60}`+"\nx", got.Body)
}

// On an error, the parts read before the one that failed are set, the
// rest is the body, and the text renders back; the error names the part.
func TestAMalformedPartIsNamedAndKept(t *testing.T) {
	t.Parallel()
	due := `azdispatch-due/1 {"after":60}` + "\n"
	for name, c := range map[string]struct {
		text    string
		err     error
		hasDue  bool
		hasMeta bool
	}{
		"due line":         {"azdispatch-due/1 {}\nbody", ErrBadDueLine, false, false},
		"metadata":         {due + "azdispatch-meta/1 {oops\nbody", ErrBadMetadata, true, false},
		"pointer":          {due + "azdispatch-meta/1 {}\nazdispatch-payload/1 {}", ErrInvalidPointer, true, true},
		"pointer too long": {strings.Replace(aPointer.Encode(), `"kind"`, strings.Repeat(" ", MaxPointerText)+`"kind"`, 1), ErrInvalidPointer, false, false},
	} {
		got, err := Parse(c.text, Limits{})
		require.ErrorIs(t, err, c.err, name)
		assert.Equal(t, c.hasDue, got.Due != nil, name)
		assert.Equal(t, c.hasMeta, got.Meta.Line() != "", name)
		assert.Nil(t, got.Pointer, name)
		assert.True(t, strings.HasSuffix(c.text, got.Body), name)
		assert.Equal(t, c.text, got.Render(), name)
	}
}

func TestAPointerIsCheckedAgainstTheLimits(t *testing.T) {
	t.Parallel()
	text := (&Text{Pointer: &Pointer{Kind: KindBatch, Blob: aPointer.Blob, Size: 100, SHA256: aPointer.SHA256, Items: 3}}).Render()
	_, err := Parse(text, Limits{MaxBlobSize: 99})
	assert.ErrorContains(t, err, "size 100 is not between 1 and MaxBlobSize 99")
	_, err = Parse(text, Limits{MaxItems: 2})
	assert.ErrorContains(t, err, "3 items, not between 1 and MaxItems 2")
	got, err := Parse(text, Limits{MaxBlobSize: 100, MaxItems: 3})
	require.NoError(t, err)
	assert.Equal(t, int64(100), got.Pointer.Size)
}

func TestMarkedTextsStartWithAPrefix(t *testing.T) {
	t.Parallel()
	for _, s := range []string{DueMagic, MetaMagic + "{}\n", PointerMagic + "x"} {
		assert.True(t, Marked(s), s)
	}
	for _, s := range []string{"", `{"n":1}`, PoisonMagic + "{}\n", " " + DueMagic, strings.TrimSpace(MetaMagic)} {
		assert.False(t, Marked(s), s)
	}
}
