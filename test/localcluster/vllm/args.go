// The fake vLLM's command line: `vllm serve` (or the api_server module) parsed as vLLM
// v0.11.0's parser does under CPython 3.12's argparse: FlexibleArgumentParser's rewriting
// (`_` for `-` in a flag's name, `--json-arg.key value`, `-O3`), then argparse over
// flags.go's options (unique prefixes, `--flag=value`, `--no-x`), with argparse's text and
// exit code 2 for what it refuses.

package vllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/example/inferenceservice-operator/test/localcluster/argparse"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// serveArgs is a parsed command line, with vLLM's defaults filled in.
type serveArgs struct {
	prog            string // "vllm serve" or "api_server.py", as argparse names itself
	model           string
	modelFlag       bool // the model came from --model under `vllm serve`: vLLM warns
	host            string
	downloadDir     string // where weights are downloaded instead of the HF cache
	uvicornLevel    string // warning and above silence uvicorn's INFO lines
	backend         string // --distributed-executor-backend ("ray": a Ray cluster's GPUs)
	port            int
	tp, pp          int
	maxNumSeqs      int
	maxNumSeqsSet   bool // --max-num-seqs was given
	maxModelLen     int  // 0: the model's own
	gpuUtil         float64
	served          []string
	enableLoRA      bool
	loraModules     []loraModule
	maxLoras        int
	maxLoRARank     int
	apiKeys         []string
	accessLog       bool
	logRequests     bool
	disableLogStats bool
	// blockSize is --block-size (vLLM's CUDA default 16); prefixCaching --[no-]enable-prefix-caching
	// (on by default in the v1 engine); gpuBlocksOverride --num-gpu-blocks-override (0: none);
	// promptTokensDetails --enable-prompt-tokens-details (usage's cached_tokens).
	blockSize           int
	prefixCaching       bool
	gpuBlocksOverride   int
	enforceEager        bool // --enforce-eager: no torch.compile, no CUDA graphs
	promptTokensDetails bool
	// maxBatchedTokens is --max-num-batched-tokens, one engine step's token budget (step.go);
	// 0: vLLM's default for the API server.
	maxBatchedTokens int
	nonDefault       []string // "'dest': value" in the parser's order, as vLLM's non-default args line
}

// loraModule is one --lora-modules entry.
type loraModule struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	BaseName string `json:"base_model_name"`
}

// argError is argparse's failure: printed after the usage line, exit code 2.
type argError struct{ prog, msg string }

func (e *argError) Error() string { return e.prog + ": error: " + e.msg }

// usage is argparse's usage line for the program: `vllm` reports the arguments its serve
// subcommand left over, `vllm serve` everything else.
func (e *argError) usage() string {
	switch e.prog {
	case "vllm serve":
		return "usage: vllm serve [model_tag] [options]"
	case "vllm":
		return "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
	}
	return "usage: api_server.py [-h] [--host HOST] [--port PORT] [options]"
}

// pyError is a Python exception vLLM raises while reading its arguments, outside argparse:
// a traceback ending in this line, exit code 1.
type pyError struct{ exc, msg string }

func (e *pyError) Error() string { return e.exc + ": " + e.msg }

// helpRequest is -h/--help: argparse prints the help and exits 0, serving nothing.
type helpRequest struct{ usage string }

func (e *helpRequest) Error() string { return e.usage }

// serveCommand reduces the container's command and args to vLLM's own argument list: the
// image's entrypoint is `vllm serve`; `vllm serve ...`, `python3 -m
// vllm.entrypoints.openai.api_server ...` and `sh -c "<one of those>"` are accepted too.
// ok is false for a command that does not start vLLM.
func serveCommand(command, args []string) (prog string, argv []string, ok bool) {
	if len(command) == 0 {
		return "vllm serve", args, true
	}
	full := append(append([]string(nil), command...), args...)
	if base(full[0]) == "sh" || base(full[0]) == "bash" {
		if len(full) >= 3 && full[1] == "-c" {
			return serveCommand(proc.ShellWords(full[2]), nil)
		}
		return "", nil, false
	}
	switch {
	case base(full[0]) == "vllm" && len(full) >= 2 && full[1] == "serve":
		return "vllm serve", full[2:], true
	case strings.HasPrefix(base(full[0]), "python") && len(full) >= 3 && full[1] == "-m" &&
		full[2] == "vllm.entrypoints.openai.api_server":
		return "api_server.py", full[3:], true
	}
	return "", nil, false
}

// imageEntrypoint is what a vLLM image runs when the container sets no command. vLLM's
// docker/Dockerfile gave the vllm-openai stage `ENTRYPOINT ["python3", "-m",
// "vllm.entrypoints.openai.api_server"]` up to v0.11.0 and `["vllm", "serve"]` after it
// (vllm#25967): the api_server takes a positional model as model_tag and ignores it, serving
// its default model. Tags it cannot read (latest, a digest) and kubelet.fake/ images get
// today's `vllm serve`.
func imageEntrypoint(image string) []string {
	apiServer := []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}
	if strings.HasPrefix(image, proc.FakeRegistry) {
		return []string{"vllm", "serve"}
	}
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	var major, minor, patch int
	if n, _ := fmt.Sscanf(strings.TrimPrefix(tag, "v"), "%d.%d.%d", &major, &minor, &patch); n >= 2 {
		if major == 0 && (minor < 11 || minor == 11 && patch == 0) {
			return apiServer
		}
	}
	return []string{"vllm", "serve"}
}

func base(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// parseServeArgs parses argv as vLLM does: FlexibleArgumentParser's rewriting, then argparse;
// under `vllm serve`, the serve subparser, whose leftovers its parent `vllm` reports.
func parseServeArgs(prog string, argv []string) (*serveArgs, error) {
	top := prog
	if prog == "vllm serve" {
		top = "vllm"
	}
	if err := checkConfigArg(argv); err != nil {
		return nil, err
	}
	args, err := flexibleArgs(argv)
	if err != nil {
		return nil, err
	}
	p := newArgParser(prog)
	ns, extras, err := p.parse(args)
	if err != nil {
		return nil, err
	}
	if len(extras) > 0 {
		return nil, &argError{prog: top, msg: "unrecognized arguments: " + strings.Join(extras, " ")}
	}
	return p.result(ns), nil
}

// checkConfigArg is what FlexibleArgumentParser checks of `--config FILE` before reading the
// file: one of them, followed by a file name ending in .yaml or .yml. The fake cannot read a
// container's files, so a config file's options are not applied.
func checkConfigArg(argv []string) error {
	n, at := 0, -1
	for i, a := range argv {
		if a == "--config" {
			n, at = n+1, i
		}
	}
	switch {
	case n == 0:
		return nil
	case n > 1:
		return &pyError{"AssertionError", "More than one config file specified!"}
	case at == len(argv)-1:
		return &pyError{"ValueError", "No config file specified! " + strings.Repeat(" ", 29) +
			"Please check your command-line arguments."}
	}
	file := argv[at+1]
	if ext := file[strings.LastIndex(file, ".")+1:]; ext != "yaml" && ext != "yml" {
		return &pyError{"ValueError", "('Config file must be of a yaml/yml type." + strings.Repeat(" ", 30) +
			"%s supplied', " + pyrepr.Str(ext) + ")"}
	}
	return nil
}

// flexibleArgs is FlexibleArgumentParser.parse_args's rewriting of the arguments before
// argparse sees them: in a `--` argument's name (before `=` and the first `.`), `_` becomes
// `-`; `-O3`, `-O=3` and `-O 3` become `-O.level 3`; and every argument that starts with `-`
// and has a `.` in its name is a key of a JSON argument, taking the next argument (or the part
// after `=`) as its value, JSON when it parses, else a string (`key+` splits it at commas into
// a list). Those keys are merged per argument and appended at the end as `--arg '{json}'`.
func flexibleArgs(in []string) ([]string, error) {
	var out []string
	for i, arg := range in {
		switch {
		case strings.HasPrefix(arg, "--help="):
			out = append(out, "--help")
		case strings.HasPrefix(arg, "--"):
			if key, val, ok := strings.Cut(arg, "="); ok {
				out = append(out, dashedName(key)+"="+val)
			} else {
				out = append(out, dashedName(arg))
			}
		case strings.HasPrefix(arg, "-O") && arg != "-O" && arg[2] != '.':
			level := arg[2:]
			if arg[2] == '=' {
				level = arg[3:]
			}
			out = append(out, "-O.level="+level)
		case arg == "-O" && i+1 < len(in) && len(in[i+1]) == 1 && strings.Contains("0123", in[i+1]):
			out = append(out, "-O.level")
		default:
			out = append(out, arg)
		}
	}

	type dictArg struct {
		flag string
		val  *pyDict
	}
	var dicts []*dictArg
	dictOf := func(flag string) *dictArg {
		for _, d := range dicts {
			if d.flag == flag {
				return d
			}
		}
		d := &dictArg{flag: flag, val: &pyDict{}}
		dicts = append(dicts, d)
		return d
	}
	drop := map[int]bool{}
	for i := 0; i < len(out); i++ {
		arg := out[i]
		if drop[i] || !strings.HasPrefix(arg, "-") || !strings.Contains(arg, ".") {
			continue
		}
		var valueStr string
		if key, val, ok := strings.Cut(arg, "="); ok {
			if !strings.Contains(key, ".") {
				continue // the `.` was in the value
			}
			arg, valueStr = key, val
		} else {
			if i+1 >= len(out) {
				return nil, &pyError{"IndexError", "list index out of range"}
			}
			valueStr = out[i+1]
			drop[i+1] = true
		}
		var value any
		if strings.HasSuffix(arg, "+") {
			arg = arg[:len(arg)-1]
			var items []any
			for _, s := range strings.Split(valueStr, ",") {
				items = append(items, s)
			}
			value = items
		} else if v, err := parseJSON(valueStr); err == nil {
			value = v
		} else {
			value = valueStr
		}
		keys := strings.Split(arg, ".")
		for k := len(keys) - 1; k >= 1; k-- {
			value = &pyDict{keys: []string{keys[k]}, vals: []any{value}}
		}
		dictOf(keys[0]).val.update(value.(*pyDict))
		drop[i] = true
	}
	var kept []string
	for i, a := range out {
		if !drop[i] {
			kept = append(kept, a)
		}
	}
	for _, d := range dicts {
		kept = append(kept, d.flag, pyJSONDumps(d.val))
	}
	return kept, nil
}

// dashedName turns `_` into `-` in a `--` argument's name, up to its first `.`.
func dashedName(arg string) string {
	name, rest := arg[2:], ""
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name, rest = name[:i], name[i:]
	}
	return "--" + strings.ReplaceAll(name, "_", "-") + rest
}

// argParser is argparse's parser of vllm serve's options (and its positional model_tag).
type argParser struct {
	prog    string
	opts    []serveOption
	strings argparse.Strings[serveOption]
}

func newArgParser(prog string) *argParser {
	p := &argParser{prog: prog, opts: serveOptions()}
	for i := range p.opts {
		for _, f := range p.opts[i].flags {
			p.strings.Add(f, &p.opts[i])
		}
	}
	return p
}

// optMatch is an argument argparse took for an option.
type optMatch = argparse.Match[serveOption]

func (p *argParser) fail(format string, a ...any) error {
	return &argError{prog: p.prog, msg: fmt.Sprintf(format, a...)}
}

// argFail is argparse's error about one option: "argument --x/-x: ...".
func (p *argParser) argFail(o *serveOption, format string, a ...any) error {
	return p.fail("argument %s: %s", strings.Join(o.flags, "/"), fmt.Sprintf(format, a...))
}

// takesNoValue is whether the option's action consumes no argument.
func (o *serveOption) takesNoValue() bool {
	return o.action == actStoreTrue || o.action == actBoolOpt || o.action == actHelp
}

// parse is argparse's parse_known_args over the serve options: every argument is classified
// first (an ambiguous abbreviation fails before anything else), then options and the
// positional model_tag are consumed in turn. ns holds the given options' converted values by
// dest; extras are the arguments no option or positional took.
func (p *argParser) parse(args []string) (ns map[string]any, extras []string, err error) {
	ns = map[string]any{}
	pattern, opts, ambiguous := p.strings.Classify(args)
	if ambiguous != "" {
		return nil, nil, p.fail("%s", ambiguous)
	}
	maxOpt := -1
	for i := range opts {
		maxOpt = max(maxOpt, i)
	}

	tagLeft := true // model_tag, nargs '?', is consumed once
	positionals := func(start int) int {
		if !tagLeft {
			return start
		}
		n := 0
		for start+n < len(pattern) && pattern[start+n] == '-' {
			n++
		}
		if start+n < len(pattern) && pattern[start+n] == 'A' {
			n++
		}
		for start+n < len(pattern) && pattern[start+n] == '-' {
			n++
		}
		tagLeft = false
		vals := dropFirstDashDash(args[start : start+n])
		if len(vals) > 0 {
			ns["model_tag"] = vals[0]
		}
		return start + n
	}

	start := 0
	for start <= maxOpt {
		next := start
		for _, ok := opts[next]; !ok; _, ok = opts[next] {
			next++
		}
		if start != next {
			end := positionals(start)
			if end > start {
				start = end
				continue
			}
		}
		if _, ok := opts[start]; !ok {
			extras = append(extras, args[start:next]...)
			start = next
		}
		m := opts[start]
		if m.Opt == nil {
			extras = append(extras, args[start])
			start++
			continue
		}
		if start, err = p.consumeOption(m, args, pattern, start, ns); err != nil {
			return nil, nil, err
		}
	}
	stop := positionals(start)
	extras = append(extras, args[stop:]...)
	return ns, extras, nil
}

func dropFirstDashDash(vals []string) []string {
	for i, v := range vals {
		if v == "--" {
			return append(append([]string(nil), vals[:i]...), vals[i+1:]...)
		}
	}
	return vals
}

// consumeOption takes the option at args[start] with its values and returns where the next
// argument starts.
func (p *argParser) consumeOption(m optMatch, args []string, pattern []byte, start int, ns map[string]any) (int, error) {
	o := m.Opt
	if m.HasExplicit {
		if !o.takesNoValue() {
			return start + 1, p.take(o, m.Flag, []string{m.Explicit}, ns)
		}
		// a one-letter valueless option (-h) may have more such options glued on
		if m.Flag[1] != '-' && m.Explicit != "" && !m.Sep && m.Explicit[0] != '-' {
			if _, ok := p.strings.Lookup("-" + m.Explicit[:1]); ok {
				return start + 1, p.take(o, m.Flag, nil, ns)
			}
		}
		return 0, p.argFail(o, "ignored explicit argument %s", pyrepr.Str(m.Explicit))
	}
	n, short := argparse.Values(pattern, start, o.nargs, o.takesNoValue())
	if short != "" {
		return 0, p.argFail(o, "%s", short)
	}
	return start + 1 + n, p.take(o, m.Flag, args[start+1:start+1+n], ns)
}

// take is the option's action with its values.
func (p *argParser) take(o *serveOption, flag string, vals []string, ns map[string]any) error {
	switch o.action {
	case actHelp:
		return &helpRequest{usage: (&argError{prog: p.prog}).usage()}
	case actStoreTrue:
		ns[o.dest] = true
		return nil
	case actBoolOpt:
		ns[o.dest] = !strings.HasPrefix(flag, "--no-")
		return nil
	}
	var v any
	switch {
	case o.nargs == '?' && len(vals) == 0:
		v = o.konst == "True"
	case o.nargs == '+':
		list := make([]any, len(vals))
		for i, s := range vals {
			x, err := p.value(o, s)
			if err != nil {
				return err
			}
			list[i] = x
		}
		v = list
	default:
		x, err := p.value(o, vals[0])
		if err != nil {
			return err
		}
		v = x
	}
	switch o.action {
	case actAppend:
		list, _ := ns[o.dest].([]any)
		ns[o.dest] = append(list, v)
	case actLoRA:
		mods, err := p.loraModules(v.([]any))
		if err != nil {
			return err
		}
		ns[o.dest] = mods
	default:
		ns[o.dest] = v
	}
	return nil
}

// The functions vLLM's type callables name in their errors, at the addresses a CPython
// process would print; a real process prints its own.
const (
	loadsFunc    = "<function loads at 0x7f9c3a5b2f20>"
	humanIntFunc = "<function human_readable_int at 0x7f9c2f41c4a0>"
)

// pydanticURL is where pydantic 2.11 (vLLM v0.11.0's image) points a validation error.
const pydanticURL = "https://errors.pydantic.dev/2.11/v/"

// value is argparse's _get_value and _check_value: the string converted by the option's type,
// then checked against its choices.
func (p *argParser) value(o *serveOption, s string) (any, error) {
	optional := o.value == vOptStr || o.value == vOptInt || o.value == vOptFloat || o.value == vOptHumanInt ||
		o.value == vOptJSONDict || o.value == vOptJSON || o.value == vOptDataclass
	var v any
	switch {
	case optional && (s == "" || s == "None"):
		v = nil
	case o.value == vInt || o.value == vOptInt:
		n, ok := pyIntOf(s)
		if !ok && o.value == vInt {
			return nil, p.argFail(o, "invalid int value: %s", pyrepr.Str(s))
		} else if !ok {
			return nil, p.argFail(o, "Value %s cannot be converted to <class 'int'>.", s)
		}
		v = n
	case o.value == vFloat || o.value == vOptFloat:
		x, ok := pyFloatOf(s)
		if !ok && o.value == vFloat {
			return nil, p.argFail(o, "invalid float value: %s", pyrepr.Str(s))
		} else if !ok {
			return nil, p.argFail(o, "Value %s cannot be converted to <class 'float'>.", s)
		}
		v = x
	case o.value == vHumanInt || o.value == vOptHumanInt:
		n, typeErr, ok := humanReadableInt(s)
		switch {
		case typeErr != "":
			return nil, p.argFail(o, "%s", typeErr)
		case !ok && o.value == vHumanInt:
			return nil, p.argFail(o, "invalid human_readable_int value: %s", pyrepr.Str(s))
		case !ok:
			return nil, p.argFail(o, "Value %s cannot be converted to %s.", s, humanIntFunc)
		}
		v = n
	case o.value == vBool:
		v = s != ""
	case o.value == vLoads:
		x, err := parseJSON(s)
		if err != nil {
			return nil, p.argFail(o, "invalid loads value: %s", pyrepr.Str(s))
		}
		v = x
	case o.value == vJSONDict || o.value == vOptJSONDict || o.value == vOptJSON ||
		(o.value == vDictOrStr && looksLikeDict(s)):
		x, err := parseJSON(s)
		if err != nil {
			return nil, p.argFail(o, "Value %s cannot be converted to %s.", s, loadsFunc)
		}
		v = x
	case o.value == vDataclass || o.value == vOptDataclass:
		x, msg := validateDataclass(o.class, s)
		if msg != "" {
			return nil, p.argFail(o, "%s", msg)
		}
		v = x
	default: // str, no type, and union_dict_and_str's plain string
		v = s
	}
	if o.choices == nil {
		return v, nil
	}
	if v != nil {
		for _, c := range o.choices {
			if pyStr(v) == c {
				return v, nil
			}
		}
	}
	return nil, p.argFail(o, "invalid choice: %s (choose from %s)", pyrepr.Str(pyStr(v)), strings.Join(o.choices, ", "))
}

// looksLikeDict is union_dict_and_str's test: braces around the rest, blanks aside.
func looksLikeDict(s string) bool {
	t := strings.TrimFunc(s, unicode.IsSpace)
	return strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") && len(t) >= 2
}

// validateDataclass is pydantic's TypeAdapter(class).validate_json as vLLM's parse_dataclass
// reports it: the text of the ValidationError, "" when valid. The fake checks that the JSON
// parses to an object; it does not check the object's fields against the class.
func validateDataclass(class, s string) (any, string) {
	v, err := parseJSON(s)
	if err != nil {
		line, col := err.position(s)
		return nil, fmt.Sprintf("1 validation error for %s\n  Invalid JSON: %s at line %d column %d [type=json_invalid, input_value=%s, input_type=str]\n    For further information visit %sjson_invalid",
			class, err.msg, line, col, pydanticInput(pyrepr.Str(s)), pydanticURL)
	}
	d, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Sprintf("1 validation error for %s\n  Input should be an object [type=dataclass_type, input_value=%s, input_type=%s]\n    For further information visit %sdataclass_type",
			class, pydanticInput(pyReprOf(v)), pyTypeName(v), pydanticURL)
	}
	if level, ok := d.get("level"); ok && class == "CompilationConfig" {
		if msg, typ := intFieldError(level); msg != "" {
			return nil, fmt.Sprintf("1 validation error for %s\nlevel\n  %s [type=%s, input_value=%s, input_type=%s]\n    For further information visit %s%s",
				class, msg, typ, pydanticInput(pyReprOf(level)), pyTypeName(level), pydanticURL, typ)
		}
	}
	return v, ""
}

// intFieldError is pydantic's lax validation of an Optional[int] field from JSON (the one the
// fake checks: CompilationConfig.level, which -O3 sets): its message and error type, "" when
// valid.
func intFieldError(v any) (msg, typ string) {
	switch x := v.(type) {
	case nil, bool:
		return "", ""
	case pyNum:
		switch {
		case x.isInt:
			return "", ""
		case math.IsInf(x.f, 0) || math.IsNaN(x.f):
			return "Input should be a finite number", "finite_number"
		case x.f != math.Trunc(x.f):
			return "Input should be a valid integer, got a number with a fractional part", "int_from_float"
		}
		return "", ""
	case string:
		if _, ok := pyIntOf(x); ok {
			return "", ""
		}
		if f, ok := pyFloatOf(x); ok && f.f == math.Trunc(f.f) && !math.IsInf(f.f, 0) {
			return "", ""
		}
		return "Input should be a valid integer, unable to parse string as an integer", "int_parsing"
	}
	return "Input should be a valid integer", "int_type"
}

// pydanticInput is an input_value as pydantic prints it: a repr over 50 characters keeps its
// first 25 and last 24.
func pydanticInput(repr string) string {
	r := []rune(repr)
	if len(r) <= 50 {
		return repr
	}
	return string(r[:25]) + "..." + string(r[len(r)-24:])
}

// loraModules is vLLM's LoRAParserAction: each value `name=path` (no comma) or a JSON object
// of LoRAModulePath's fields; the option's last occurrence wins.
func (p *argParser) loraModules(vals []any) ([]loraModule, error) {
	mods := []loraModule{}
	for _, v := range vals {
		item, _ := v.(string)
		if item == "" {
			continue
		}
		if strings.Contains(item, "=") && !strings.Contains(item, ",") {
			parts := strings.Split(item, "=")
			if len(parts) != 2 {
				return nil, &pyError{"ValueError", "too many values to unpack (expected 2)"}
			}
			mods = append(mods, loraModule{Name: parts[0], Path: parts[1]})
			continue
		}
		j, err := parseJSON(item)
		if err != nil {
			return nil, p.fail("Invalid JSON format for --lora-modules: %s", item)
		}
		if msg := loraFieldsError(j); msg != "" {
			return nil, p.fail("Invalid fields for --lora-modules: %s - %s", item, msg)
		}
		d := j.(*pyDict)
		m := loraModule{}
		for i, k := range d.keys {
			switch k {
			case "name":
				m.Name = pyStr(d.vals[i])
			case "path":
				m.Path = pyStr(d.vals[i])
			case "base_model_name":
				if d.vals[i] != nil {
					m.BaseName = pyStr(d.vals[i])
				}
			}
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// loraFieldsError is the TypeError of LoRAModulePath(**j), "" when it constructs.
func loraFieldsError(j any) string {
	d, ok := j.(*pyDict)
	if !ok {
		return "vllm.entrypoints.openai.serving_models.LoRAModulePath() argument after ** must be a mapping, not " + pyTypeName(j)
	}
	for _, k := range d.keys {
		if k != "name" && k != "path" && k != "base_model_name" {
			return "LoRAModulePath.__init__() got an unexpected keyword argument " + pyrepr.Str(k)
		}
	}
	var missing []string
	for _, k := range []string{"name", "path"} {
		if _, ok := d.get(k); !ok {
			missing = append(missing, pyrepr.Str(k))
		}
	}
	switch len(missing) {
	case 1:
		return "LoRAModulePath.__init__() missing 1 required positional argument: " + missing[0]
	case 2:
		return "LoRAModulePath.__init__() missing 2 required positional arguments: " + missing[0] + " and " + missing[1]
	}
	return ""
}

// result is the parsed namespace as the fake uses it, with vLLM's non-default args line:
// every option whose value differs from its default, in the parser's order, model_tag first.
func (p *argParser) result(ns map[string]any) *serveArgs {
	a := &serveArgs{prog: p.prog, model: "Qwen/Qwen3-0.6B", port: 8000, tp: 1, pp: 1, maxNumSeqs: 256,
		gpuUtil: 0.9, maxLoras: 1, maxLoRARank: 16, accessLog: true,
		blockSize: kvBlockTokens, prefixCaching: true}
	if m, ok := ns["model"].(string); ok {
		a.model, a.modelFlag = m, true
	}
	tag, hasTag := ns["model_tag"].(string)
	if hasTag {
		a.nonDefault = append(a.nonDefault, "'model_tag': "+pyrepr.Str(tag))
		if p.prog == "vllm serve" {
			// vllm serve copies model_tag into model
			ns["model"], a.model = tag, tag
		}
	}
	for i := range p.opts {
		o := &p.opts[i]
		v, given := ns[o.dest]
		if !given || o.action == actHelp {
			continue
		}
		if repr := pyReprOf(v); !sameValue(repr, o.def) {
			a.nonDefault = append(a.nonDefault, "'"+o.dest+"': "+repr)
		}
		switch o.dest {
		case "host":
			a.host, _ = v.(string)
		case "port":
			a.port = intOf(v, a.port)
		case "tensor_parallel_size":
			a.tp = intOf(v, a.tp)
		case "pipeline_parallel_size":
			a.pp = intOf(v, a.pp)
		case "max_num_seqs":
			a.maxNumSeqs, a.maxNumSeqsSet = intOf(v, a.maxNumSeqs), true
		case "max_num_batched_tokens":
			a.maxBatchedTokens = max(intOf(v, 0), 0)
		case "max_loras":
			a.maxLoras = intOf(v, a.maxLoras)
		case "max_lora_rank":
			a.maxLoRARank = intOf(v, a.maxLoRARank)
		case "max_model_len":
			a.maxModelLen = max(intOf(v, 0), 0)
		case "gpu_memory_utilization":
			if n, ok := v.(pyNum); ok {
				a.gpuUtil = n.f
			}
		case "served_model_name":
			a.served = stringsOf(v)
		case "api_key":
			a.apiKeys = stringsOf(v)
		case "lora_modules":
			a.loraModules, _ = v.([]loraModule)
		case "enable_lora":
			a.enableLoRA = v == true
		case "disable_uvicorn_access_log":
			a.accessLog = v != true
		case "enable_log_requests":
			a.logRequests = v == true
		case "disable_log_stats":
			a.disableLogStats = v == true
		case "block_size":
			a.blockSize = max(intOf(v, a.blockSize), 1)
		case "enable_prefix_caching":
			a.prefixCaching = v != false
		case "enforce_eager":
			a.enforceEager = v == true
		case "num_gpu_blocks_override":
			a.gpuBlocksOverride = max(intOf(v, 0), 0)
		case "enable_prompt_tokens_details":
			a.promptTokensDetails = v == true
		case "download_dir":
			a.downloadDir, _ = v.(string)
		case "uvicorn_log_level":
			a.uvicornLevel, _ = v.(string)
		case "distributed_executor_backend":
			a.backend, _ = v.(string)
		}
	}
	if len(a.served) == 0 {
		a.served = []string{a.model}
	}
	return a
}

func intOf(v any, def int) int {
	if n, ok := v.(pyNum); ok && n.isInt && math.Abs(n.f) < 1<<62 {
		return int(n.f)
	}
	return def
}

// stringsOf is a list option's strings; the None an optional_type makes of "" or "None" aside.
func stringsOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// sameValue is Python's == between a value and an option's default, both as Python prints
// them: numbers compare by value (4.0 == 4).
func sameValue(repr, def string) bool {
	if repr == def {
		return true
	}
	x, errX := strconv.ParseFloat(repr, 64)
	y, errY := strconv.ParseFloat(def, 64)
	return errX == nil && errY == nil && x == y
}
