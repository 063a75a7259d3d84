package engine

import "unicode/utf8"

// MaxLastWords bounds the quoted line of a crash, in bytes: enough for an exception and its
// message's start, short enough for a status message and an Event note.
const MaxLastWords = 200

// Bounded cuts s to MaxLastWords bytes on a character boundary.
func Bounded(s string) string {
	if len(s) <= MaxLastWords {
		return s
	}
	cut := MaxLastWords - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
