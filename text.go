package azdispatch

import (
	"fmt"
	"unicode/utf8"
)

// checkText refuses a message text the service would refuse (longer than
// limit UTF-8 bytes) or that XML cannot carry: the SDK sends messages inside
// an XML document, and Go's XML encoder silently replaces invalid UTF-8 and
// the control characters XML 1.0 forbids with U+FFFD.
func checkText(text string, limit int) error {
	if len(text) > limit {
		return &MessageTooLargeError{Size: len(text), Limit: limit}
	}
	for i, r := range text {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(text[i:]); size == 1 {
				return fmt.Errorf("%w: invalid UTF-8 at byte %d (use a Base64 codec for binary data)", ErrInvalidText, i)
			}
		}
		if !isXMLChar(r) {
			return fmt.Errorf("%w: character %U at byte %d (use a Base64 codec for binary data)", ErrInvalidText, r, i)
		}
	}
	return nil
}

// isXMLChar reports whether r is allowed in XML 1.0 character data.
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
