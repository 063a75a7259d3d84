//go:build tools

// Package krew pins krew's own commands (sigs.k8s.io/krew), built by build.sh: the release's
// krew manifest is checked by the tools krew-index checks a submission with.
package krew

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
