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

	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
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
	strings Strings[Option]
}

// New is ArgumentParser(prog=prog) with -h/--help and the options added in order.
func New(prog string, opts []Option) *Parser {
	p := &Parser{Prog: prog}
	p.Options = append([]Option{{Flags: []string{"-h", "--help"}, Dest: "help", Action: Help}}, opts...)
	for i := range p.Options {
		for _, f := range p.Options[i].Flags {
			p.strings.Add(f, &p.Options[i])
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

// Parse is parse_args: every argument classified first (an ambiguous abbreviation fails
// before anything else), then the options consumed in turn, then the required options
// checked, then anything left over refused as "unrecognized arguments".
func (p *Parser) Parse(args []string) (Namespace, error) {
	ns := Namespace{}
	pattern, opts, ambiguous := p.strings.Classify(args)
	if ambiguous != "" {
		return nil, p.fail("%s", ambiguous)
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
		case m.Opt == nil:
			extras = append(extras, args[i])
			i++
			continue
		}
		next, err := p.consume(m, args, pattern, i, ns)
		if err != nil {
			return nil, err
		}
		seen[m.Opt] = true
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
func (p *Parser) consume(m Match[Option], args []string, pattern []byte, i int, ns Namespace) (int, error) {
	o := m.Opt
	if m.HasExplicit {
		if o.takesNoValue() {
			return 0, p.argFail(o, "ignored explicit argument %s", pyrepr.Str(m.Explicit))
		}
		return i + 1, p.take(o, []string{m.Explicit}, ns)
	}
	n, short := Values(pattern, i, o.Nargs, o.takesNoValue())
	if short != "" {
		return 0, p.argFail(o, "%s", short)
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
			return nil, p.argFail(o, "invalid int value: %s", pyrepr.Str(s))
		}
		v = n
	case Float:
		f, ok := PyFloat(s)
		if !ok {
			return nil, p.argFail(o, "invalid float value: %s", pyrepr.Str(s))
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
			reprs[i] = pyrepr.Str(c)
			if o.Type == Int {
				reprs[i] = c
			}
		}
		shown := pyrepr.Str(s)
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
