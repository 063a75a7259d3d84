package argparse

import "strings"

// Strings is a parser's option strings as argparse matches an argument against them, whichever
// option type the parser keeps (O): each string names its option, and the order is the one
// they were added in (_option_string_actions, which _get_option_tuples walks).
type Strings[O any] struct {
	exact map[string]*O
	order []string
}

// Add registers flag as a name of o.
func (s *Strings[O]) Add(flag string, o *O) {
	if s.exact == nil {
		s.exact = map[string]*O{}
	}
	s.exact[flag] = o
	s.order = append(s.order, flag)
}

// Lookup is the option flag names exactly.
func (s *Strings[O]) Lookup(flag string) (*O, bool) {
	o, ok := s.exact[flag]
	return o, ok
}

// Match is an argument argparse took for an option.
type Match[O any] struct {
	Opt         *O     // nil: no option of this parser (argparse keeps it as an extra)
	Flag        string // the option string matched (the argument itself when Opt is nil)
	Explicit    string // the value after `=`, or glued to a one-letter option
	HasExplicit bool
	Sep         bool // the explicit value came after `=`
}

// IsNegativeNumber is argparse's _negative_number_matcher, '^-\d+$|^-\d*\.\d+$'.
func IsNegativeNumber(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	digits, dot := 0, false
	for _, c := range s[1:] {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0 && (!dot || s[len(s)-1] != '.')
}

// ParseOptional is argparse's _parse_optional: whether arg is an option, and which. An
// abbreviation that fits several options is refused: ambiguous is the error's message
// ("ambiguous option: ...") and the parser's own error carries it.
func (s *Strings[O]) ParseOptional(arg string) (m Match[O], isOpt bool, ambiguous string) {
	if arg == "" || arg[0] != '-' {
		return m, false, ""
	}
	if o, ok := s.exact[arg]; ok {
		return Match[O]{Opt: o, Flag: arg}, true, ""
	}
	if len(arg) == 1 {
		return m, false, ""
	}
	if key, val, ok := strings.Cut(arg, "="); ok {
		if o, ok := s.exact[key]; ok {
			return Match[O]{Opt: o, Flag: key, Explicit: val, HasExplicit: true, Sep: true}, true, ""
		}
	}
	ms := s.prefixMatches(arg)
	if len(ms) > 1 {
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.Flag
		}
		return m, false, "ambiguous option: " + arg + " could match " + strings.Join(names, ", ")
	}
	if len(ms) == 1 {
		return ms[0], true, ""
	}
	if IsNegativeNumber(arg) || strings.Contains(arg, " ") {
		return m, false, ""
	}
	return Match[O]{Flag: arg}, true, ""
}

// prefixMatches is argparse's _get_option_tuples (allow_abbrev on, argparse's default): the
// options a `--` argument is a prefix of, up to its `=`; for a `-` argument, the one-letter
// option it starts with (the rest glued on as its value) and the options it is a prefix of.
func (s *Strings[O]) prefixMatches(arg string) []Match[O] {
	var out []Match[O]
	prefix, val, sep := strings.Cut(arg, "=")
	if arg[1] == '-' {
		for _, f := range s.order {
			if strings.HasPrefix(f, prefix) {
				out = append(out, Match[O]{Opt: s.exact[f], Flag: f, Explicit: val, HasExplicit: sep, Sep: sep})
			}
		}
		return out
	}
	short, glued := arg[:2], arg[2:]
	for _, f := range s.order {
		switch {
		case f == short:
			out = append(out, Match[O]{Opt: s.exact[f], Flag: f, Explicit: glued, HasExplicit: true})
		case strings.HasPrefix(f, prefix):
			out = append(out, Match[O]{Opt: s.exact[f], Flag: f, Explicit: val, HasExplicit: sep, Sep: sep})
		}
	}
	return out
}

// Classify is the first pass of _parse_known_args: each argument an option ('O', its match
// in opts), an argument ('A'), or the first "--" ('-', after which everything is 'A'). An
// ambiguous abbreviation stops it: ambiguous is the message.
func (s *Strings[O]) Classify(args []string) (pattern []byte, opts map[int]Match[O], ambiguous string) {
	pattern = make([]byte, len(args))
	opts = map[int]Match[O]{}
	for i := 0; i < len(args); i++ {
		if args[i] == "--" { // what follows is positional
			pattern[i] = '-'
			for j := i + 1; j < len(args); j++ {
				pattern[j] = 'A'
			}
			break
		}
		m, isOpt, amb := s.ParseOptional(args[i])
		if amb != "" {
			return nil, nil, amb
		}
		pattern[i] = 'A'
		if isOpt {
			opts[i], pattern[i] = m, 'O'
		}
	}
	return pattern, opts, ""
}

// Values is _match_argument for the option at pattern[i]: how many of the arguments after it
// it takes, by its nargs (0: one value; '?', '*', '+') or none when it takes no value. When
// too few follow, short is argparse's complaint ("expected one argument").
func Values(pattern []byte, i int, nargs byte, noValue bool) (n int, short string) {
	for i+1+n < len(pattern) && pattern[i+1+n] == 'A' {
		n++
	}
	switch {
	case noValue:
		return 0, ""
	case nargs == '?':
		return min(n, 1), ""
	case nargs == '*':
		return n, ""
	case nargs == '+':
		if n == 0 {
			return 0, "expected at least one argument"
		}
		return n, ""
	}
	if n == 0 {
		return 0, "expected one argument"
	}
	return 1, ""
}
