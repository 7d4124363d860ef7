package azdispatch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// DescribeText tells the kinds of text apart, as a peek shows them.
func TestDescribeTextTellsEveryKind(t *testing.T) {
	t.Parallel()
	blob, sum := strings.Repeat("0f", 16), strings.Repeat("ab", 32)
	pointer := wire.PointerMagic + `{"kind":"batch","blob":"` + blob + `","size":10,"sha256":"` + sum + `","items":2}`
	envelope, err := (&PoisonEnvelope{Queue: "q", MessageID: "m", Reason: "r", Body: "body"}).encode()
	require.NoError(t, err)
	for name, c := range map[string]struct {
		text     string
		kind     TextKind
		reserved bool
		body     string
	}{
		"plain":           {`{"n":1}`, TextPlain, false, `{"n":1}`},
		"metadata":        {wire.MetaMagic + "{\"k\":\"v\"}\n{\"n\":1}", TextPlain, true, `{"n":1}`},
		"pointer":         {wire.MetaMagic + "{\"k\":\"v\"}\n" + pointer, TextPointer, true, ""},
		"invalid pointer": {wire.PointerMagic + "{}", TextInvalidPointer, true, wire.PointerMagic + "{}"},
		"bad metadata":    {wire.MetaMagic + "{oops\nbody", TextBadMetadata, true, wire.MetaMagic + "{oops\nbody"},
		"bad due line":    {wire.DueMagic + "{}\nbody", TextBadDueLine, true, wire.DueMagic + "{}\nbody"},
		"poison":          {envelope, TextPoison, false, envelope},
	} {
		info := DescribeText(c.text)
		assert.Equal(t, c.kind, info.Kind, name)
		assert.Equal(t, c.reserved, info.Reserved, name)
		assert.Equal(t, c.body, info.Body, name)
		assert.Equal(t, info.Kind != TextPlain && info.Kind != TextPointer && info.Kind != TextPoison, info.Problem != "", name)
	}

	info := DescribeText(wire.MetaMagic + "{\"k\":\"v\"}\n" + pointer)
	assert.Equal(t, Metadata{"k": "v"}, info.Metadata)
	require.NotNil(t, info.Pointer)
	b, err := json.Marshal(info.Pointer)
	require.NoError(t, err)
	assert.JSONEq(t, strings.TrimPrefix(pointer, wire.PointerMagic), string(b), "the pointer's own JSON")

	info = DescribeText(envelope)
	require.NotNil(t, info.Poison)
	assert.Equal(t, "body", info.Poison.Body)
}

func TestDescribeTextReadsTheDueLine(t *testing.T) {
	t.Parallel()
	inserted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	info := DescribeText(wire.DueMagic + "{\"after\":864000,\"hops\":1,\"seen\":1}\n{\"n\":1}")
	require.NotNil(t, info.Due)
	assert.Equal(t, TextPlain, info.Kind)
	assert.Equal(t, int64(1), info.Due.Hops)
	assert.Equal(t, inserted.Add(10*24*time.Hour), info.Due.DueAt(inserted))
	assert.Equal(t, `{"n":1}`, info.Body)

	once := strings.Repeat("a", 32)
	info = DescribeText(wire.DueMagic + `{"at":"2030-01-01T00:00:00Z","occ":{"s":"nightly","t":1893456000,"once":"` + once + `"}}` + "\nx")
	require.NotNil(t, info.Due)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, at, info.Due.DueAt(inserted))
	require.NotNil(t, info.Due.Occurrence)
	assert.Equal(t, "nightly", info.Due.Occurrence.Schedule)
	assert.Equal(t, at, info.Due.Occurrence.At)

	assert.Nil(t, DescribeText(`{"n":1}`).Due)
}
