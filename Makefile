# The two commands the README promises, and their parts.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: demo test unit e2e build cluster manifests lint

# Run the operator's main job on the embedded local cluster.
demo:
	$(GO) run ./test/demo

# Everything CI runs: static checks, unit tables, the local cluster's own tests and the
# end-to-end suite against it. The first run builds the cluster (about 7 minutes).
test: lint
	$(GO) test -timeout 45m -count=1 ./...

unit:
	$(GO) test -count=1 ./crd/... ./queue/... ./controller/... ./informers/... ./metrics/...

e2e:
	$(GO) test -timeout 45m -count=1 -v ./test/e2e/

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/inferenceservice-operator .

cluster:
	test/localcluster/build.sh

# Regenerate the CRD manifest from crd.Definition().
manifests:
	$(GO) test ./crd -run TestManifest -update

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
