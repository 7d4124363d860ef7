package xmltext

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		text     string
		wantOK   bool
		wantText string // in the error's message
	}{
		{"empty", "", true, ""},
		{"plain", `{"n":1}`, true, ""},
		{"tab, newline and carriage return", "a\tb\nc\r\n", true, ""},
		{"multibyte", "ünïcödé 日本語", true, ""},
		{"emoji", "ok 👍 𝄞", true, ""},
		{"highest allowed", "\uFFFD\U0010FFFF", true, ""},
		{"invalid UTF-8 byte", "ab\xffcd", false, "invalid UTF-8 at byte 2 (use a Base64 codec for binary data)"},
		{"truncated character", "é\xc3", false, "invalid UTF-8 at byte 2"},
		{"NUL", "abc\x00", false, "character U+0000 at byte 3 (use a Base64 codec for binary data)"},
		{"other control character", "\x1b[0m", false, "character U+001B at byte 0"},
		{"U+FFFE", "é\uFFFE", false, "character U+FFFE at byte 2"},
		{"U+FFFF", "\uFFFF", false, "character U+FFFF at byte 0"},
		// U+D800 encoded as UTF-8 (CESU-style): Go decodes each byte as invalid.
		{"lone surrogate", "x\xed\xa0\x80", false, "invalid UTF-8 at byte 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(tt.text)
			if tt.wantOK {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.wantText)
		})
	}
}

func TestIsXMLChar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r    rune
		want bool
	}{
		{0x00, false}, {0x08, false}, {0x09, true}, {0x0A, true}, {0x0B, false},
		{0x0D, true}, {0x1F, false}, {0x20, true}, {0xD7FF, true}, {0xD800, false},
		{0xDFFF, false}, {0xE000, true}, {0xFFFD, true}, {0xFFFE, false},
		{0x10000, true}, {0x10FFFF, true}, {0x110000, false}, {-1, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsXMLChar(tt.r), "%U", tt.r)
	}
}

func TestTruncateUTF8NeverSplitsACharacter(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ab", TruncateUTF8("abc", 2))
	assert.Equal(t, "a", TruncateUTF8("aé", 2), "é is two bytes")
	assert.Equal(t, "", TruncateUTF8("é", 1))
	assert.Equal(t, "abc", TruncateUTF8("abc", 10))
}
