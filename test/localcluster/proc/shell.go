// How a container's `sh -c` script reads, as far as the fake servers follow one: the kubelet
// hands the command as written, and each fake finds its own program in it.

package proc

import "strings"

// ShellWords is the first command of a `sh -c` script: `exec` and what follows `&&`, `||` or
// `;` are as far as the fake follows a script.
func ShellWords(s string) []string {
	if lists := ShellLists(s); len(lists) > 0 {
		return lists[0]
	}
	return nil
}

// ShellLists splits a `sh -c` script on blanks, honouring single and double quotes and
// backslashes, into its commands at each unquoted `&&`, `||` or `;`; a leading `exec` is
// dropped from each.
func ShellLists(s string) [][]string {
	var lists [][]string
	var words []string
	var cur strings.Builder
	in, quote, quoted := false, byte(0), false
	endWord := func() {
		if !in && !quoted {
			return
		}
		w := cur.String()
		cur.Reset()
		if !quoted && (w == "&&" || w == "||" || w == ";") {
			lists = append(lists, words)
			words = nil
		} else {
			words = append(words, w)
		}
		in, quoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, quoted = c, true
		case c == ' ' || c == '\t' || c == '\n':
			endWord()
			continue
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
			}
		default:
			cur.WriteByte(c)
		}
		in = true
	}
	endWord()
	lists = append(lists, words)
	var out [][]string
	for _, l := range lists {
		if len(l) > 0 && l[0] == "exec" {
			l = l[1:]
		}
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}
