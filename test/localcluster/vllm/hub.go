// The local hub's repositories as their listings show them: a model's safetensors shards and
// index, config and tokenizer files, and the duplicate formats real repos carry beside them
// (gpt2 and OPT: pytorch_model.bin, tf_model.h5, flax_model.msgpack; Meta's Llama:
// original/consolidated.NN.pth), each weight format as large as the weights; an adapter's
// adapter_config.json and adapter_model.safetensors. Names ending in -custom-code also ship
// modeling code (configuration_*.py, modeling_*.py) loaded with --trust-remote-code.

package vllm

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
)

// hubFile is one file of a repo's listing: its path in the repo and its size.
type hubFile struct {
	name string
	size int64
}

// hubFiles is the listing of repo (a model or an adapter).
func hubFiles(repo string) []hubFile {
	l := strings.ToLower(repo)
	name := l[strings.LastIndex(l, "/")+1:]
	if strings.Contains(name, "lora") || strings.Contains(name, "adapter") {
		return []hubFile{{"adapter_config.json", 700}, {"adapter_model.safetensors", 40e6}, {"README.md", 5000}}
	}
	w := hfmodel.WeightBytes(repo)
	n := shards(w)
	files := []hubFile{{"config.json", 700}, {"generation_config.json", 200}, {"tokenizer.json", 11e6},
		{"tokenizer_config.json", 9000}, {"README.md", 20000}, {".gitattributes", 1500}}
	shard := func(prefix, ext string, parts int) {
		if parts == 1 {
			files = append(files, hubFile{prefix + "." + ext, w})
			return
		}
		for i := 1; i <= parts; i++ {
			files = append(files, hubFile{fmt.Sprintf("%s-%05d-of-%05d.%s", prefix, i, parts, ext), w / int64(parts)})
		}
	}
	shard("model", "safetensors", n)
	if n > 1 {
		files = append(files, hubFile{"model.safetensors.index.json", 25000})
	}
	if strings.HasPrefix(name, "gpt2") || strings.HasPrefix(name, "opt-") {
		shard("pytorch_model", "bin", n)
		files = append(files, hubFile{"tf_model.h5", w}, hubFile{"flax_model.msgpack", w})
	}
	if strings.HasPrefix(l, "meta-llama/") {
		for i := 0; i < max(1, n/4); i++ {
			files = append(files, hubFile{fmt.Sprintf("original/consolidated.%02d.pth", i), w / int64(max(1, n/4))})
		}
		files = append(files, hubFile{"original/params.json", 200}, hubFile{"original/tokenizer.model", 2e6})
	}
	if customCode(repo) {
		files = append(files, hubFile{"configuration_custom.py", 9000}, hubFile{"modeling_custom.py", 60000})
	}
	return files
}

// customCode: the repo's config.json names classes in its own .py files (auto_map), which
// transformers runs only with trust_remote_code.
func customCode(repo string) bool { return strings.HasSuffix(strings.ToLower(repo), "-custom-code") }

// fnmatch is Python's fnmatch.fnmatch as huggingface_hub's filter_repo_objects and vLLM use
// it: * and ? match any character, '/' included; [...] a class.
func fnmatch(pattern, name string) bool {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(pattern[i:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := pattern[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return err == nil && re.MatchString(name)
}
