package xmltext

import (
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queueMessage is the element the queue service's XML carries a message's
// text in, as the Azure SDK writes it.
type queueMessage struct {
	XMLName     xml.Name `xml:"QueueMessage"`
	MessageText string   `xml:"MessageText"`
}

// FuzzCheck feeds Check any text. It passes exactly the valid UTF-8 made of
// characters XML 1.0 allows, which is exactly the text that an XML document
// written and read by encoding/xml, as the SDK does, carries unchanged; what
// it refuses names the first offending byte.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"", `{"n":1}`, "a\tb\nc\r\nd\re", "ünïcödé 日本語 𝄞", "\uFFFD\U0010FFFF", "<&>\"'",
		"ab\xffcd", "é\xc3", "abc\x00", "\x1b[0m", "é\uFFFE", "\uFFFF", "x\xed\xa0\x80", "]]>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		t.Parallel()
		err := Check(text)
		bad := firstInvalid(text)
		if bad < 0 {
			assert.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), " at byte "+strconv.Itoa(bad)+" ", "names the first offending byte")
		}

		out, merr := xml.Marshal(queueMessage{MessageText: text})
		require.NoError(t, merr)
		var back queueMessage
		require.NoError(t, xml.Unmarshal(out, &back), "%s", out)
		assert.Equal(t, err == nil, back.MessageText == text, "Check says %v; XML carries %q as %q", err, text, back.MessageText)
	})
}

// firstInvalid is the byte offset of the first invalid UTF-8 sequence or
// character XML 1.0 forbids in text, or -1, by the definitions.
func firstInvalid(text string) int {
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		ok := r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
		if !ok {
			return i
		}
		i += size
	}
	return -1
}

// FuzzTruncateUTF8 feeds TruncateUTF8 any text and length. The result is a
// prefix of the text of at most n bytes; of valid UTF-8 it is valid UTF-8,
// and the longest such prefix.
func FuzzTruncateUTF8(f *testing.F) {
	f.Add("ünïcödé 𝄞", 3)
	f.Add("𝄞𝄞", 5)
	f.Add("abc", 10)
	f.Add("abc", 0)
	f.Add("\x80\x80\x80\x80", 2)
	f.Add("é\xc3", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		t.Parallel()
		if n < 0 {
			n = -(n + 1) // every length, never a negative one
		}
		got := TruncateUTF8(s, n)
		assert.LessOrEqual(t, len(got), n)
		assert.True(t, strings.HasPrefix(s, got))
		if len(s) <= n {
			assert.Equal(t, s, got)
		}
		if utf8.ValidString(s) {
			assert.True(t, utf8.ValidString(got), "%q", got)
			if len(got) < len(s) {
				_, size := utf8.DecodeRuneInString(s[len(got):])
				assert.Greater(t, len(got)+size, n, "the next character does not fit")
			}
		}
	})
}
