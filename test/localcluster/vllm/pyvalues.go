// Python's values as vLLM's parser sees them: ints and floats as Python reads and prints them,
// dicts in insertion order, JSON read as json.loads reads it (with its error positions), and
// repr/json.dumps of the results, for the fake's "non-default args" line and its error texts.

package vllm

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// pyNum is a Python int or float: repr as Python prints it, f its value.
type pyNum struct {
	repr  string
	f     float64
	isInt bool
}

// pyIntOf is Python's int(s): blanks around, a sign, decimal digits with single underscores
// between them.
func pyIntOf(s string) (pyNum, bool) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	sign := ""
	if t != "" && (t[0] == '+' || t[0] == '-') {
		if t[0] == '-' {
			sign = "-"
		}
		t = t[1:]
	}
	digits, ok := pyDigits(t)
	if !ok {
		return pyNum{}, false
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		digits, sign = "0", ""
	}
	f, _ := strconv.ParseFloat(sign+digits, 64)
	return pyNum{repr: sign + digits, f: f, isInt: true}, true
}

// pyDigits is t without its underscores when t is digits with single underscores between
// them.
func pyDigits(t string) (string, bool) {
	if t == "" || t[0] == '_' || t[len(t)-1] == '_' || strings.Contains(t, "__") {
		return "", false
	}
	for _, c := range t {
		if (c < '0' || c > '9') && c != '_' {
			return "", false
		}
	}
	return strings.ReplaceAll(t, "_", ""), true
}

// pyFloatOf is Python's float(s): a decimal number (underscores between digits allowed),
// inf, infinity or nan, blanks around.
func pyFloatOf(s string) (pyNum, bool) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return pyNum{}, false
	}
	switch strings.ToLower(body) {
	case "inf", "infinity", "nan":
		f, _ := strconv.ParseFloat(t, 64)
		return pyNum{repr: pyFloatRepr(f), f: f}, true
	}
	// digits, optionally a point and digits, optionally an exponent; underscores only between digits
	var clean strings.Builder
	sawDigit, sawPoint, sawExp := false, false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= '0' && c <= '9':
			sawDigit = true
		case c == '_':
			if i == 0 || i == len(body)-1 || !isDigit(body[i-1]) || !isDigit(body[i+1]) {
				return pyNum{}, false
			}
			continue
		case c == '.' && !sawPoint && !sawExp:
			sawPoint = true
		case (c == 'e' || c == 'E') && sawDigit && !sawExp:
			sawExp = true
			if i+1 < len(body) && (body[i+1] == '+' || body[i+1] == '-') {
				clean.WriteByte(c)
				i++
				c = body[i]
			}
			if i+1 >= len(body) {
				return pyNum{}, false
			}
		default:
			return pyNum{}, false
		}
		clean.WriteByte(c)
	}
	if !sawDigit {
		return pyNum{}, false
	}
	f, err := strconv.ParseFloat(t[:len(t)-len(body)]+clean.String(), 64)
	if err != nil && !math.IsInf(f, 0) {
		return pyNum{}, false
	}
	return pyNum{repr: pyFloatRepr(f), f: f}, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// humanReadableInt is vLLM's human_readable_int: 4096, 1k (1000), 25.6k, 1K (1024), 1M, 1G;
// typeErr is its ArgumentTypeError (a decimal with a binary suffix), ok false its ValueError.
func humanReadableInt(s string) (n pyNum, typeErr string, ok bool) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	if m := humanIntPattern.FindStringSubmatch(t); m != nil {
		number, suffix := m[1], m[2]
		switch suffix {
		case "k", "m", "g":
			x, _ := strconv.ParseFloat(number, 64)
			x *= map[string]float64{"k": 1e3, "m": 1e6, "g": 1e9}[suffix]
			return pyNum{repr: strconv.FormatFloat(math.Trunc(x), 'f', 0, 64), f: math.Trunc(x), isInt: true}, "", true
		case "K", "M", "G":
			if strings.Contains(number, ".") {
				return pyNum{}, fmt.Sprintf("Decimals are not allowed with binary suffixes like %s. Did you mean to use %s%s instead?",
					suffix, number, strings.ToLower(suffix)), false
			}
			i, _ := strconv.ParseInt(number, 10, 64)
			i <<= map[string]uint{"K": 10, "M": 20, "G": 30}[suffix]
			return pyNum{repr: strconv.FormatInt(i, 10), f: float64(i), isInt: true}, "", true
		}
	}
	n, ok = pyIntOf(t)
	return n, "", ok
}

// humanIntPattern is human_readable_int's number and suffix; t and T match but have no
// multiplier, so they fail as plain ints do.
var humanIntPattern = regexp.MustCompile(`^(\d+(?:\.\d+)?)([kKmMgGtT])$`)

// pyDict is a Python dict from JSON: keys in insertion order.
type pyDict struct {
	keys []string
	vals []any
}

func (d *pyDict) get(k string) (any, bool) {
	for i, key := range d.keys {
		if key == k {
			return d.vals[i], true
		}
	}
	return nil, false
}

func (d *pyDict) set(k string, v any) {
	for i, key := range d.keys {
		if key == k {
			d.vals[i] = v
			return
		}
	}
	d.keys, d.vals = append(d.keys, k), append(d.vals, v)
}

// update is FlexibleArgumentParser's recursive_dict_update: nested dicts merge, lists extend,
// anything else replaces.
func (d *pyDict) update(u *pyDict) {
	for i, k := range u.keys {
		v := u.vals[i]
		old, _ := d.get(k)
		switch {
		case isDict(v) && isDict(old):
			old.(*pyDict).update(v.(*pyDict))
		case isList(v) && isList(old):
			d.set(k, append(old.([]any), v.([]any)...))
		default:
			d.set(k, v)
		}
	}
}

func isDict(v any) bool { _, ok := v.(*pyDict); return ok }
func isList(v any) bool { _, ok := v.([]any); return ok }

// jsonError is a JSON syntax error as pydantic's parser (jiter) words it, at byte at (or at
// the end of the input).
type jsonError struct {
	msg string
	at  int
	eof bool
}

func (e *jsonError) Error() string { return e.msg }

// position is the error's line and column as jiter counts them: over the input up to and
// including the offending byte (all of it, at the end).
func (e *jsonError) position(s string) (line, col int) {
	seen := s
	if !e.eof && e.at < len(s) {
		seen = s[:e.at+1]
	}
	return strings.Count(seen, "\n") + 1, len(seen) - strings.LastIndexByte(seen, '\n') - 1
}

// parseJSON reads s as Python's json.loads does (NaN and Infinity included): objects as
// *pyDict, arrays as []any, numbers as pyNum, strings, bools and nil.
func parseJSON(s string) (any, *jsonError) {
	j := &jsonReader{s: s}
	v, err := j.value()
	if err != nil {
		return nil, err
	}
	j.blanks()
	if j.i < len(s) {
		return nil, &jsonError{msg: "trailing characters", at: j.i}
	}
	return v, nil
}

type jsonReader struct {
	s string
	i int
}

func (j *jsonReader) blanks() {
	for j.i < len(j.s) && strings.IndexByte(" \t\n\r", j.s[j.i]) >= 0 {
		j.i++
	}
}

func (j *jsonReader) eof(what string) *jsonError {
	return &jsonError{msg: "EOF while parsing " + what, at: len(j.s), eof: true}
}

func (j *jsonReader) value() (any, *jsonError) {
	j.blanks()
	if j.i >= len(j.s) {
		return nil, j.eof("a value")
	}
	switch c := j.s[j.i]; {
	case c == '{':
		return j.object()
	case c == '[':
		return j.array()
	case c == '"':
		return j.str()
	case c == 't':
		return true, j.word("true")
	case c == 'f':
		return false, j.word("false")
	case c == 'n':
		return nil, j.word("null")
	case c == 'N':
		return pyNum{repr: "nan", f: math.NaN()}, j.word("NaN")
	case c == 'I':
		return pyNum{repr: "inf", f: math.Inf(1)}, j.word("Infinity")
	case c == '-' && j.i+1 < len(j.s) && j.s[j.i+1] == 'I':
		j.i++
		return pyNum{repr: "-inf", f: math.Inf(-1)}, j.word("Infinity")
	case c == '-' || isDigit(c):
		return j.number()
	}
	return nil, &jsonError{msg: "expected value", at: j.i}
}

func (j *jsonReader) word(w string) *jsonError {
	for k := 0; k < len(w); k++ {
		if j.i+k >= len(j.s) {
			return j.eof("a value")
		}
		if j.s[j.i+k] != w[k] {
			return &jsonError{msg: "expected ident", at: j.i + k}
		}
	}
	j.i += len(w)
	return nil
}

func (j *jsonReader) number() (any, *jsonError) {
	start := j.i
	if j.s[j.i] == '-' {
		j.i++
	}
	digits := func() *jsonError {
		if j.i >= len(j.s) {
			return j.eof("a value")
		}
		if !isDigit(j.s[j.i]) {
			return &jsonError{msg: "invalid number", at: j.i}
		}
		for j.i < len(j.s) && isDigit(j.s[j.i]) {
			j.i++
		}
		return nil
	}
	if j.i < len(j.s) && j.s[j.i] == '0' {
		j.i++
		if j.i < len(j.s) && isDigit(j.s[j.i]) {
			return nil, &jsonError{msg: "invalid number", at: j.i}
		}
	} else if err := digits(); err != nil {
		return nil, err
	}
	isInt := true
	if j.i < len(j.s) && j.s[j.i] == '.' {
		j.i, isInt = j.i+1, false
		if err := digits(); err != nil {
			return nil, err
		}
	}
	if j.i < len(j.s) && (j.s[j.i] == 'e' || j.s[j.i] == 'E') {
		j.i, isInt = j.i+1, false
		if j.i < len(j.s) && (j.s[j.i] == '+' || j.s[j.i] == '-') {
			j.i++
		}
		if err := digits(); err != nil {
			return nil, err
		}
	}
	text := j.s[start:j.i]
	f, _ := strconv.ParseFloat(text, 64)
	if isInt {
		n, _ := pyIntOf(text)
		return n, nil
	}
	return pyNum{repr: pyFloatRepr(f), f: f}, nil
}

func (j *jsonReader) str() (any, *jsonError) {
	j.i++ // the opening quote
	var b strings.Builder
	for {
		if j.i >= len(j.s) {
			return nil, j.eof("a string")
		}
		c := j.s[j.i]
		switch {
		case c == '"':
			j.i++
			return b.String(), nil
		case c < 0x20:
			return nil, &jsonError{msg: `control character (\u0000-\u001F) found while parsing a string`, at: j.i}
		case c != '\\':
			b.WriteByte(c)
			j.i++
			continue
		}
		j.i++
		if j.i >= len(j.s) {
			return nil, j.eof("a string")
		}
		switch e := j.s[j.i]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b', 'f', 'n', 'r', 't':
			b.WriteByte(map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[e])
		case 'u':
			r, err := j.hex4()
			if err != nil {
				return nil, err
			}
			if r >= 0xd800 && r < 0xdc00 && strings.HasPrefix(j.s[j.i+1:], `\u`) {
				save := j.i
				j.i += 2
				if lo, err := j.hex4(); err == nil && lo >= 0xdc00 && lo < 0xe000 {
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
				} else {
					j.i = save
				}
			}
			b.WriteRune(r)
		default:
			return nil, &jsonError{msg: "invalid escape", at: j.i}
		}
		j.i++
	}
}

// hex4 reads the four hex digits after `\u` (j.i at the u) and leaves j.i at the last.
func (j *jsonReader) hex4() (rune, *jsonError) {
	if j.i+4 >= len(j.s) {
		return 0, j.eof("a string")
	}
	n, err := strconv.ParseUint(j.s[j.i+1:j.i+5], 16, 32)
	if err != nil {
		return 0, &jsonError{msg: "invalid escape", at: j.i + 1}
	}
	j.i += 4
	return rune(n), nil
}

func (j *jsonReader) array() (any, *jsonError) {
	j.i++
	list := []any{}
	j.blanks()
	if j.i >= len(j.s) {
		return nil, j.eof("a list")
	}
	if j.s[j.i] == ']' {
		j.i++
		return list, nil
	}
	for {
		v, err := j.value()
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		j.blanks()
		switch {
		case j.i >= len(j.s):
			return nil, j.eof("a list")
		case j.s[j.i] == ']':
			j.i++
			return list, nil
		case j.s[j.i] != ',':
			return nil, &jsonError{msg: "expected `,` or `]`", at: j.i}
		}
		j.i++
		j.blanks()
		if j.i < len(j.s) && j.s[j.i] == ']' {
			return nil, &jsonError{msg: "trailing comma", at: j.i}
		}
	}
}

func (j *jsonReader) object() (any, *jsonError) {
	j.i++
	d := &pyDict{}
	j.blanks()
	if j.i >= len(j.s) {
		return nil, j.eof("an object")
	}
	if j.s[j.i] == '}' {
		j.i++
		return d, nil
	}
	for {
		if j.s[j.i] != '"' {
			return nil, &jsonError{msg: "key must be a string", at: j.i}
		}
		k, err := j.str()
		if err != nil {
			return nil, err
		}
		j.blanks()
		if j.i >= len(j.s) {
			return nil, j.eof("an object")
		}
		if j.s[j.i] != ':' {
			return nil, &jsonError{msg: "expected `:`", at: j.i}
		}
		j.i++
		v, err := j.value()
		if err != nil {
			return nil, err
		}
		d.set(k.(string), v)
		j.blanks()
		switch {
		case j.i >= len(j.s):
			return nil, j.eof("an object")
		case j.s[j.i] == '}':
			j.i++
			return d, nil
		case j.s[j.i] != ',':
			return nil, &jsonError{msg: "expected `,` or `}`", at: j.i}
		}
		j.i++
		j.blanks()
		switch {
		case j.i >= len(j.s):
			return nil, j.eof("a value")
		case j.s[j.i] == '}':
			return nil, &jsonError{msg: "trailing comma", at: j.i}
		}
	}
}

// pyJSONDumps is Python's json.dumps: `, ` and `: ` separators, non-ASCII escaped.
func pyJSONDumps(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case pyNum:
		switch {
		case math.IsNaN(x.f):
			return "NaN"
		case math.IsInf(x.f, 1):
			return "Infinity"
		case math.IsInf(x.f, -1):
			return "-Infinity"
		}
		return x.repr
	case string:
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range x {
			switch {
			case r == '"' || r == '\\':
				b.WriteString(`\` + string(r))
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\f':
				b.WriteString(`\f`)
			case r < 0x20 || (r > 0x7f && r <= 0xffff):
				fmt.Fprintf(&b, `\u%04x`, r)
			case r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
		return b.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyJSONDumps(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *pyDict:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyJSONDumps(k) + ": " + pyJSONDumps(x.vals[i])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "null"
}

// pyReprOf is Python's repr of a parsed value.
func pyReprOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case pyNum:
		return x.repr
	case string:
		return pyrepr.Str(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyReprOf(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *pyDict:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyrepr.Str(k) + ": " + pyReprOf(x.vals[i])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []loraModule:
		parts := make([]string, len(x))
		for i, m := range x {
			b := "None"
			if m.BaseName != "" {
				b = pyrepr.Str(m.BaseName)
			}
			parts[i] = fmt.Sprintf("LoRAModulePath(name=%s, path=%s, base_model_name=%s)", pyrepr.Str(m.Name), pyrepr.Str(m.Path), b)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// pyStr is Python's str of a parsed value.
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyReprOf(v)
}

// pyTypeName is the name of a parsed value's Python type.
func pyTypeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case pyNum:
		if x.isInt {
			return "int"
		}
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *pyDict:
		return "dict"
	}
	return "object"
}

// pyFloatRepr is Python's repr of a float, inf and nan included.
func pyFloatRepr(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return pyrepr.Float(x)
}
