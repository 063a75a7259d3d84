// Package pyrepr is Python's repr() of the values the fake model servers print (their
// arguments, errors and metrics), whichever engine they fake: what a CPython process writes.
package pyrepr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Str is Python's repr of a str: single quotes unless only double quotes avoid escaping,
// control and non-printable characters escaped.
func Str(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	b.WriteByte(q)
	return b.String()
}

// Float is Python's repr of a float: 0.9, 1.0, 1e-05, 1764770000.123.
func Float(x float64) string {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if ax := math.Abs(x); x != 0 && (ax < 1e-4 || ax >= 1e16) {
		s = strconv.FormatFloat(x, 'e', -1, 64)
	}
	if !strings.ContainsAny(s, ".eIN") {
		s += ".0"
	}
	return s
}
