package vllm

import "regexp"

// processPrefix is how vLLM v0.11 tags the lines of each of its processes' stdout and stderr:
// "(APIServer pid=1) ", "(EngineCore_DP0 pid=250) ", "(Worker_TP0 pid=311) ", always between
// colour codes ("\x1b[1;36m(NAME pid=PID)\x1b[0;0m ", vllm/utils _add_prefix), which a log read
// through pods/log keeps. The one place both log readers (start phases, last words) cut it.
var processPrefix = regexp.MustCompile(`^(?:\x1b\[[0-9;]*m)?\(([A-Za-z0-9_]+ pid=\d+)\)(?:\x1b\[[0-9;]*m)? ?`)

// cutProcess cuts a line's process prefix: the process ("EngineCore_DP0 pid=250") and the rest;
// "" and the line itself when it has none.
func cutProcess(line string) (proc, rest string) {
	m := processPrefix.FindStringSubmatch(line)
	if m == nil {
		return "", line
	}
	return m[1], line[len(m[0]):]
}
