// Package argparse is CPython 3.12's argparse as a fake server's command line meets it: a
// plain ArgumentParser (allow_abbrev left on, no positionals) over a table of options, with
// argparse's own texts for what it refuses and its usage line, wrapped as its HelpFormatter
// wraps it. Engine-neutral: the fake SGLang (sglang/) parses launch_server's options with it.
// The fake vLLM keeps its own parser (vllm/args.go), which adds FlexibleArgumentParser's
// rewriting and vLLM's types.
package argparse

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Action is what argparse does with an option it matched.
type Action uint8

const (
	Store     Action = iota // store the converted value (a list, for nargs '*' and '+')
	StoreTrue               // store_true: takes no value
	Help                    // -h/--help: argparse prints the help and exits 0
)

// Type is the type= callable a value is converted with.
type Type uint8

const (
	Str   Type = iota // str (or no type)
	Int               // int
	Float             // float
)

// Option is one add_argument call.
type Option struct {
	Flags    []string // option strings, in the order add_argument names them
	Dest     string   // the namespace attribute
	Action   Action
	Type     Type
	Nargs    byte     // 0: one value (none for StoreTrue and Help), or '?', '*', '+'
	Choices  []string // as add_argument lists them; a value must be one, after conversion
	Required bool
}

// metavar is the default metavar: the dest in upper case.
func (o *Option) metavar() string { return strings.ToUpper(o.Dest) }

// takesNoValue is whether the option's action consumes no argument.
func (o *Option) takesNoValue() bool { return o.Action == StoreTrue || o.Action == Help }

// Parser is an ArgumentParser with its options, in registration order.
type Parser struct {
	Prog    string
	Options []Option
	exact   map[string]*Option
	strings []string // every option string, in registration order
}

// New is ArgumentParser(prog=prog) with -h/--help and the options added in order.
func New(prog string, opts []Option) *Parser {
	p := &Parser{Prog: prog, exact: map[string]*Option{}}
	p.Options = append([]Option{{Flags: []string{"-h", "--help"}, Dest: "help", Action: Help}}, opts...)
	for i := range p.Options {
		for _, f := range p.Options[i].Flags {
			p.exact[f] = &p.Options[i]
			p.strings = append(p.strings, f)
		}
	}
	return p
}

// Error is argparse's refusal: parser.error prints the usage, then "prog: error: msg", and
// exits 2.
type Error struct {
	Prog, Msg string
	Usage     string // the usage block, "usage: ..." over its lines
}

func (e *Error) Error() string { return e.Prog + ": error: " + e.Msg }

// Lines are what the process writes to stderr: the usage block, then the error.
func (e *Error) Lines() []string { return append(strings.Split(e.Usage, "\n"), e.Error()) }

// HelpRequest is -h/--help: argparse prints the help (its usage first) and exits 0.
type HelpRequest struct{ Usage string }

func (e *HelpRequest) Error() string { return e.Usage }

// Namespace is the parsed values by dest: string, int, float64, bool, or []any for the list
// nargs. An option not given is absent.
type Namespace map[string]any

func (p *Parser) fail(format string, a ...any) error {
	return &Error{Prog: p.Prog, Msg: fmt.Sprintf(format, a...), Usage: p.Usage()}
}

// argFail is argparse's error about one option: "argument --x/--y: ...".
func (p *Parser) argFail(o *Option, format string, a ...any) error {
	return p.fail("argument %s: %s", strings.Join(o.Flags, "/"), fmt.Sprintf(format, a...))
}

// match is an argument argparse took for an option.
type match struct {
	opt         *Option // nil: no option of this parser (argparse keeps it as an extra)
	flag        string
	explicit    string // the value after `=`
	hasExplicit bool
}

// isNegativeNumber is argparse's _negative_number_matcher, '^-\d+$|^-\d*\.\d+$'.
func isNegativeNumber(s string) bool {
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

// parseOptional is argparse's _parse_optional: whether arg is an option, and which; an
// abbreviation that fits several options is refused here.
func (p *Parser) parseOptional(arg string) (match, bool, error) {
	if arg == "" || arg[0] != '-' {
		return match{}, false, nil
	}
	if o, ok := p.exact[arg]; ok {
		return match{opt: o, flag: arg}, true, nil
	}
	if len(arg) == 1 {
		return match{}, false, nil
	}
	key, val, hasEq := strings.Cut(arg, "=")
	if hasEq {
		if o, ok := p.exact[key]; ok {
			return match{opt: o, flag: key, explicit: val, hasExplicit: true}, true, nil
		}
	}
	// _get_option_tuples: a "--" argument is matched by prefix up to its '='; allow_abbrev
	// is argparse's default, which launch_server's parser keeps.
	var ms []match
	if strings.HasPrefix(arg, "--") {
		for _, f := range p.strings {
			if strings.HasPrefix(f, key) {
				ms = append(ms, match{opt: p.exact[f], flag: f, explicit: val, hasExplicit: hasEq})
			}
		}
	} else {
		for _, f := range p.strings {
			if f == arg[:2] && !strings.HasPrefix(f, "--") {
				ms = append(ms, match{opt: p.exact[f], flag: f, explicit: arg[2:], hasExplicit: true})
			} else if strings.HasPrefix(f, key) {
				ms = append(ms, match{opt: p.exact[f], flag: f, explicit: val, hasExplicit: hasEq})
			}
		}
	}
	if len(ms) > 1 {
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.flag
		}
		return match{}, false, p.fail("ambiguous option: %s could match %s", arg, strings.Join(names, ", "))
	}
	if len(ms) == 1 {
		return ms[0], true, nil
	}
	if isNegativeNumber(arg) || strings.Contains(arg, " ") {
		return match{}, false, nil
	}
	return match{flag: arg}, true, nil
}

// Parse is parse_args: every argument classified first (an ambiguous abbreviation fails
// before anything else), then the options consumed in turn, then the required options
// checked, then anything left over refused as "unrecognized arguments".
func (p *Parser) Parse(args []string) (Namespace, error) {
	ns := Namespace{}
	pattern := make([]byte, len(args))
	opts := map[int]match{}
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			pattern[i] = '-'
			for j := i + 1; j < len(args); j++ {
				pattern[j] = 'A'
			}
			break
		}
		m, isOpt, err := p.parseOptional(args[i])
		if err != nil {
			return nil, err
		}
		pattern[i] = 'A'
		if isOpt {
			opts[i], pattern[i] = m, 'O'
		}
	}
	var extras []string
	seen := map[*Option]bool{}
	for i := 0; i < len(args); {
		m, isOpt := opts[i]
		switch {
		case pattern[i] == '-':
			i++ // the first "--" is argparse's, not an argument
			continue
		case !isOpt:
			extras = append(extras, args[i])
			i++
			continue
		case m.opt == nil:
			extras = append(extras, args[i])
			i++
			continue
		}
		next, err := p.consume(m, args, pattern, i, ns)
		if err != nil {
			return nil, err
		}
		seen[m.opt] = true
		i = next
	}
	var missing []string
	for i := range p.Options {
		if o := &p.Options[i]; o.Required && !seen[o] {
			missing = append(missing, strings.Join(o.Flags, "/"))
		}
	}
	if len(missing) > 0 {
		return nil, p.fail("the following arguments are required: %s", strings.Join(missing, ", "))
	}
	if len(extras) > 0 {
		return nil, p.fail("unrecognized arguments: %s", strings.Join(extras, " "))
	}
	return ns, nil
}

// consume takes the option at args[i] with its values and returns where the next argument
// starts.
func (p *Parser) consume(m match, args []string, pattern []byte, i int, ns Namespace) (int, error) {
	o := m.opt
	if m.hasExplicit {
		if o.takesNoValue() {
			return 0, p.argFail(o, "ignored explicit argument %s", pyRepr(m.explicit))
		}
		return i + 1, p.take(o, []string{m.explicit}, ns)
	}
	n := 0
	for i+1+n < len(pattern) && pattern[i+1+n] == 'A' {
		n++
	}
	switch {
	case o.takesNoValue():
		n = 0
	case o.Nargs == '?':
		n = min(n, 1)
	case o.Nargs == '*':
	case o.Nargs == '+':
		if n == 0 {
			return 0, p.argFail(o, "expected at least one argument")
		}
	default:
		if n == 0 {
			return 0, p.argFail(o, "expected one argument")
		}
		n = 1
	}
	return i + 1 + n, p.take(o, args[i+1:i+1+n], ns)
}

// take is the option's action with its values.
func (p *Parser) take(o *Option, vals []string, ns Namespace) error {
	switch o.Action {
	case Help:
		return &HelpRequest{Usage: p.Usage()}
	case StoreTrue:
		ns[o.Dest] = true
		return nil
	}
	if o.Nargs == '*' || o.Nargs == '+' {
		list := make([]any, 0, len(vals))
		for _, s := range vals {
			v, err := p.value(o, s)
			if err != nil {
				return err
			}
			list = append(list, v)
		}
		ns[o.Dest] = list
		return nil
	}
	if len(vals) == 0 { // nargs '?' without a value: its const, None here
		ns[o.Dest] = nil
		return nil
	}
	v, err := p.value(o, vals[0])
	if err != nil {
		return err
	}
	ns[o.Dest] = v
	return nil
}

// value is _get_value then _check_value: the type's conversion, then the choices.
func (p *Parser) value(o *Option, s string) (any, error) {
	var v any = s
	switch o.Type {
	case Int:
		n, ok := PyInt(s)
		if !ok {
			return nil, p.argFail(o, "invalid int value: %s", pyRepr(s))
		}
		v = n
	case Float:
		f, ok := PyFloat(s)
		if !ok {
			return nil, p.argFail(o, "invalid float value: %s", pyRepr(s))
		}
		v = f
	}
	if len(o.Choices) > 0 {
		str := fmt.Sprint(v)
		for _, c := range o.Choices {
			if c == str {
				return v, nil
			}
		}
		reprs := make([]string, len(o.Choices))
		for i, c := range o.Choices {
			reprs[i] = pyRepr(c)
			if o.Type == Int {
				reprs[i] = c
			}
		}
		shown := pyRepr(s)
		if o.Type == Int {
			shown = str
		}
		// CPython 3.12.3 (Ubuntu 24.04's, the lmsysorg/sglang images' interpreter) prints
		// the choices by repr; 3.12.8 and later print them plainly.
		return nil, p.argFail(o, "invalid choice: %s (choose from %s)", shown, strings.Join(reprs, ", "))
	}
	return v, nil
}

// PyInt is Python's int() of a string: blanks around it, a sign, underscores between digits.
func PyInt(s string) (int, bool) {
	t := strings.TrimSpace(s)
	if t == "" || strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") || strings.Contains(t, "__") {
		return 0, false
	}
	t = strings.ReplaceAll(t, "_", "")
	if len(t) > 1 && (t[0] == '+' || t[0] == '-') && (t[1] == '+' || t[1] == '-') {
		return 0, false
	}
	n, err := strconv.Atoi(t)
	return n, err == nil
}

// PyFloat is Python's float() of a string: blanks around it, inf and nan in any case.
func PyFloat(s string) (float64, bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch strings.TrimLeft(t, "+-") {
	case "inf", "infinity":
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	if strings.ContainsAny(t, "xp") { // Go reads hex floats; Python's float() does not
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	return f, err == nil && !strings.Contains(t, "__")
}

// pyRepr is Python's repr() of a str: single quotes unless the string holds one and no double.
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case string(r) == q:
			b.WriteString(`\` + q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// Usage is the parser's usage block as HelpFormatter writes it at 80 columns (COLUMNS unset,
// no terminal: argparse's width is 80 - 2): "usage: prog [-h] ...", the options wrapped under
// the program's name.
func (p *Parser) Usage() string {
	const textWidth = 78
	parts := make([]string, 0, len(p.Options))
	for i := range p.Options {
		parts = append(parts, p.Options[i].usagePart())
	}
	prefix := "usage: "
	if len(prefix)+len(p.Prog)+1+len(strings.Join(parts, " ")) <= textWidth {
		return prefix + p.Prog + " " + strings.Join(parts, " ")
	}
	// _format_usage's get_lines: the program's name on the first line, every later line
	// indented to the first option.
	indent := strings.Repeat(" ", len(prefix)+len(p.Prog)+1)
	var lines []string
	line := []string{p.Prog}
	lineLen := len(prefix) - 1 + len(p.Prog) + 1
	for _, part := range parts {
		if lineLen+1+len(part) > textWidth && len(line) > 0 {
			lines = append(lines, indent+strings.Join(line, " "))
			line, lineLen = nil, len(indent)-1
		}
		line = append(line, part)
		lineLen += len(part) + 1
	}
	if len(line) > 0 {
		lines = append(lines, indent+strings.Join(line, " "))
	}
	lines[0] = lines[0][len(indent):]
	return prefix + strings.Join(lines, "\n")
}

// usagePart is the option in the usage line: its first option string and its arguments,
// bracketed unless required.
func (o *Option) usagePart() string {
	s := o.Flags[0]
	if !o.takesNoValue() {
		mv := o.metavar()
		if len(o.Choices) > 0 {
			mv = "{" + strings.Join(o.Choices, ",") + "}"
		}
		switch o.Nargs {
		case '?':
			mv = "[" + mv + "]"
		case '*':
			mv = "[" + mv + " ...]"
		case '+':
			mv = mv + " [" + mv + " ...]"
		}
		s += " " + mv
	}
	if o.Required {
		return s
	}
	return "[" + s + "]"
}
