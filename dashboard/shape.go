package dashboard

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxShape bounds a reason's shape: the poison page's filter takes 200
// bytes, and a group is named by its shape.
const maxShape = 200

// maxReason bounds the part of a reason its shape is made from: an
// envelope's header holds at most 1 KiB of it anyway.
const maxReason = 4 << 10

// The parts of a reason that differ from one message to the next, each
// masked by reasonShape, in this order: a quoted value first (it may hold
// any of the rest), then times, GUIDs and other long IDs before the
// numbers inside them.
var (
	shapeDoubleQuoted = regexp.MustCompile(`"[^"]*"`)
	shapeCurlyQuoted  = regexp.MustCompile(`“[^“”]*”`)
	shapeTime         = regexp.MustCompile(`\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?`)
	shapeGUID         = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// A token of letters, digits, '_' and '-' that may be an ID: see isID.
	shapeToken  = regexp.MustCompile(`[A-Za-z0-9_\-]{6,}`)
	shapeNumber = regexp.MustCompile(`\d+(?:[.,]\d+)*`)
)

// reasonShape is a poison reason with what varies from one message to the
// next masked: quoted values become "…", times <time>, GUIDs and other
// IDs <id>, numbers <n>; runs of white space become one space. Reasons
// that differ only in those ("payment declined for order 17" and "… 18")
// have one shape, and the poison page groups them by it. It is idempotent
// (a shape's shape is itself), holds no digit, and is at most maxShape
// bytes of valid UTF-8.
func reasonShape(reason string) string {
	// What lies past maxReason cannot reach a shape's first maxShape
	// bytes but through quotes that close there: not worth the time.
	reason = truncateUTF8(reason, maxReason)
	s := mask(strings.Join(strings.Fields(strings.ToValidUTF8(reason, "\uFFFD")), " "))
	// Cutting to length can make a quote at the cut a closing one, and
	// masking can lengthen a short quoted value: cut and mask again until
	// neither changes anything, so that a shape is its own shape.
	for range 16 {
		next := mask(truncateShape(s))
		if next == s {
			break
		}
		s = next
	}
	return s
}

// mask replaces what varies in s, as reasonShape says.
func mask(s string) string {
	s = shapeDoubleQuoted.ReplaceAllString(s, `"…"`)
	s = shapeCurlyQuoted.ReplaceAllString(s, `“…”`)
	s = maskSingleQuoted(s)
	s = shapeTime.ReplaceAllString(s, "<time>")
	s = shapeGUID.ReplaceAllString(s, "<id>")
	s = shapeToken.ReplaceAllStringFunc(s, func(tok string) string {
		if isID(tok) {
			return "<id>"
		}
		return tok
	})
	s = shapeNumber.ReplaceAllString(s, "<n>")
	// Digits of other scripts are numbers too.
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return '#'
		}
		return r
	}, s)
}

// maskSingleQuoted replaces each single-quoted value with '…'. A value
// opens with a quote at the start of a word and closes with the next
// quote, if that ends a word, so that the apostrophes of "can't" and
// "don't" pair with nothing.
func maskSingleQuoted(s string) string {
	if !strings.Contains(s, "'") {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		if s[i] != '\'' || !wordEdge(s[:i], true) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := strings.IndexByte(s[i+1:], '\'')
		if j < 0 || !wordEdge(s[i+1+j+1:], false) {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString("'…'")
		i += 1 + j + 1
	}
	return b.String()
}

// wordEdge says whether a quote may open a value after before (at is the
// start: true) or close one before after (false): the neighbouring rune
// is none, or neither a letter, a digit nor a quote.
func wordEdge(s string, before bool) bool {
	var r rune
	var size int
	if before {
		r, size = utf8.DecodeLastRuneInString(s)
	} else {
		r, size = utf8.DecodeRuneInString(s)
	}
	return size == 0 || !(unicode.IsLetter(r) || unicode.IsNumber(r) || r == '\'')
}

// truncateUTF8 cuts s to at most n bytes at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// truncateShape cuts s to maxShape bytes at a rune boundary, marking the
// cut with "…".
func truncateShape(s string) string {
	if len(s) <= maxShape {
		return s
	}
	return truncateUTF8(s, maxShape-len("…")) + "…"
}

// isID says whether a token of letters, digits, '_' and '-' is an ID
// rather than a word with a number: one whose letters and digits change
// places twice or more ("ord_8Xk2LmQp", "a1b2c3"), or eight or more
// hexadecimal digits with both a digit and a letter ("9f86d081"). A word
// and its number ("order17", "utf8", "sha256") is not: its digits are
// masked as a number, so that "order17" and "order1234" have one shape.
func isID(tok string) bool {
	changes, prev := 0, 0
	hex, digit, letter := true, false, false
	for _, r := range tok {
		class := 0
		switch {
		case isASCIIDigit(r):
			class, digit = 1, true
		case isASCIILetter(r):
			class, letter = 2, true
			hex = hex && strings.ContainsRune("abcdefABCDEF", r)
		default:
			hex = false
		}
		if class != 0 {
			if prev != 0 && class != prev {
				changes++
			}
			prev = class
		}
	}
	return changes >= 2 || hex && digit && letter && len(tok) >= 8
}

func isRuneStart(b byte) bool   { return b&0xC0 != 0x80 }
func isASCIIDigit(r rune) bool  { return '0' <= r && r <= '9' }
func isASCIILetter(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }
