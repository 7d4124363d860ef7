// Package xmltext checks that a message text can travel inside the XML
// document the queue service speaks. Go's XML encoder silently replaces
// invalid UTF-8 and the control characters XML 1.0 forbids with U+FFFD, which
// would corrupt the message, so such text is refused before it is sent.
package xmltext

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalid means a message text holds something the XML the service speaks
// cannot carry (invalid UTF-8 or a forbidden control character). It is
// refused before sending; binary payloads need a base64 codec.
var ErrInvalid = errors.New("azdispatch: message text is not valid XML character data")

// Check refuses a text that XML cannot carry: invalid UTF-8, or a character
// XML 1.0 forbids. The error wraps ErrInvalid and names the first offending
// byte offset. Check does not bound the text's size.
func Check(text string) error {
	for i, r := range text {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(text[i:]); size == 1 {
				return fmt.Errorf("%w: invalid UTF-8 at byte %d (use a Base64 codec for binary data)", ErrInvalid, i)
			}
		}
		if !IsXMLChar(r) {
			return fmt.Errorf("%w: character %U at byte %d (use a Base64 codec for binary data)", ErrInvalid, r, i)
		}
	}
	return nil
}

// IsXMLChar reports whether r is allowed in XML 1.0 character data.
func IsXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// TruncateUTF8 cuts s to at most n bytes without splitting a character.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
