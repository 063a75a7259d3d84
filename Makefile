# The two commands the README promises, and their parts.
GO ?= go
# Every build and test without cgo, as the local cluster, the third-party binaries and the
# operator's image are built: go vet, the suite and those builds then share one compile of each
# dependency in the Go cache (with cgo on, the main module's ~1,000 dependencies compiled twice
# on a fresh machine). Nothing here needs cgo: no -race, no C.
export CGO_ENABLED = 0
# bash, for `set -o pipefail`: a test run piped through test/slowest keeps go test's exit status.
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: demo plugin test unit e2e incluster build image docker-build cluster helm krew kubectl kueue lws epp manifests lint bench bench-10k bench-kserve bench-adapter bench-routing bench-pickers fuzz faults-full soak soak-ci release release-check bench-activator bench-ramp

# Run the operator's main job on the embedded local cluster. The cluster, kubectl and the demo
# are built first with their progress shown (a fresh machine compiles for several minutes).
demo:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	test/buildprogress/buildprogress.sh demo $(GO) build -o bin/demo ./test/demo
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) bin/demo

# The kubectl plugin: kubectl isvc why NAME, kubectl isvc list. Copy bin/kubectl-isvc and
# bin/kubectl_complete-isvc (kubectl's completion for it, 1.26 and later) onto the PATH. Its own
# module (cli-runtime brings kustomize, which the operator does not need), built as test/epp is.
PLUGIN_DIR := controller/walk/kubectl-isvc
plugin:
	cd $(PLUGIN_DIR) && GOWORK=off $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(CURDIR)/bin/kubectl-isvc .
	install -m 0755 $(PLUGIN_DIR)/kubectl_complete-isvc bin/kubectl_complete-isvc

# Everything CI runs: static checks, unit tables, the local cluster's own tests and the
# end-to-end suite against it. The cluster is built first, once, outside any test's timeout
# (about 7 minutes the first time on 2 cores, seconds after that).
LOCALCLUSTER_BIN ?= $(CURDIR)/test/localcluster/bin/localcluster
# kubectl at the local cluster's version (test/kubectl), the one every test runs.
KUBECTL_BIN ?= $(CURDIR)/test/kubectl/bin/kubectl
HELM_BIN ?= $(CURDIR)/test/helm/bin/helm
# krew and krew-index's validate-krew-manifest (test/krew), which check the release's krew manifest.
KREW_BIN ?= $(CURDIR)/test/krew/bin/krew
KUEUE_BIN ?= $(CURDIR)/test/kueue/bin/kueue
LWS_BIN ?= $(CURDIR)/test/lws/bin/lws
# The local S3 server (test/s3: gofakes3 behind S3's SigV4 check), for the s3:// weights fill.
S3_BIN ?= $(CURDIR)/test/s3/bin/s3
# How many of the e2e tests that may run side by side do (2 cores; they mostly wait on the cluster).
E2E_PARALLEL ?= 4
# How many processes the e2e package runs as in make test, each with its own cluster.
E2E_SHARDS ?= 3
EPP_BIN ?= $(CURDIR)/test/epp/bin/epp
# build.sh builds the test gateway next to the picker.
GATEWAY_BIN ?= $(dir $(EPP_BIN))gateway
# Where make test's time goes: each phase's seconds, printed at its end (test/slowest/phase.sh).
PHASES_FILE ?= $(CURDIR)/bin/phases.txt
export PHASES_FILE
PHASE := test/slowest/phase.sh
test:
	@mkdir -p $(dir $(PHASES_FILE)) && : > $(PHASES_FILE)
	$(PHASE) lint $(MAKE) lint
	$(PHASE) build-localcluster test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	$(PHASE) build-kubectl test/kubectl/build.sh $(KUBECTL_BIN)
	$(PHASE) build-helm test/helm/build.sh $(HELM_BIN)
	$(PHASE) build-krew test/krew/build.sh $(KREW_BIN)
	$(PHASE) build-kueue test/kueue/build.sh $(KUEUE_BIN)
	$(PHASE) build-lws test/lws/build.sh $(LWS_BIN)
	$(PHASE) build-epp test/epp/build.sh $(EPP_BIN)
	$(PHASE) build-s3 test/s3/build.sh $(S3_BIN)
	# The suite (test/suite/run.sh): the main module's packages, the e2e package as E2E_SHARDS
	# processes side by side (each its own cluster: test/e2e/shard_test.go), and four modules'
	# own tests in the background (the local world's, test/epp's, test/s3's and the plugin's); it ends with
	# each package's time and the 20 slowest tests. -parallel (E2E_PARALLEL) bounds the e2e
	# tests that run side by side in one shard; SOAK_CI=1: the soak's CI size runs too;
	# TestRelease builds the image for the host's architecture only (make release-check: both).
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) HELM_BIN=$(HELM_BIN) KREW_BIN=$(KREW_BIN) KUEUE_BIN=$(KUEUE_BIN) LWS_BIN=$(LWS_BIN) \
		EPP_BIN=$(EPP_BIN) GATEWAY_BIN=$(GATEWAY_BIN) S3_BIN=$(S3_BIN) SOAK_CI=1 RELEASE_TEST_IMAGE_ARCHS=$$($(GO) env GOARCH) \
		GO=$(GO) E2E_SHARDS=$(E2E_SHARDS) E2E_PARALLEL=$(E2E_PARALLEL) PLUGIN_DIR=$(PLUGIN_DIR) \
		$(PHASE) suite test/suite/run.sh || { $(PHASE) --report; exit 1; }
	# A count, not a duration: a -fuzztime deadline that falls while a worker minimizes a new
	# input fails the run with "context deadline exceeded" (seen once here); 20000 inputs take
	# about 5-11 s a target on 2 cores.
	$(PHASE) fuzz $(MAKE) fuzz FUZZTIME=20000x
	@$(PHASE) --report

unit:
	$(GO) test -count=1 ./crd/... ./queue/... ./controller/... ./informers/... ./metrics/...
	cd $(PLUGIN_DIR) && GOWORK=off $(GO) test -count=1 ./...
	cd test/localcluster && GOWORK=off $(GO) test -count=1 ./...

e2e:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	test/kueue/build.sh $(KUEUE_BIN)
	test/lws/build.sh $(LWS_BIN)
	test/epp/build.sh $(EPP_BIN)
	test/s3/build.sh $(S3_BIN)
	set -o pipefail; LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) KUEUE_BIN=$(KUEUE_BIN) LWS_BIN=$(LWS_BIN) EPP_BIN=$(EPP_BIN) GATEWAY_BIN=$(GATEWAY_BIN) S3_BIN=$(S3_BIN) \
		$(GO) test -timeout 45m -count=1 -parallel $(E2E_PARALLEL) -v ./test/e2e/ | test/slowest/slowest.sh 15

# Leader election, in-cluster config, RBAC, overlays and manifests on the local cluster.
incluster:
	test/kubectl/build.sh $(KUBECTL_BIN)
	KUBECTL_BIN=$(KUBECTL_BIN) $(GO) test -timeout 20m -count=1 -v ./test/incluster/

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/inferenceservice-operator .

# The OCI image without Docker (an OCI layout tarball: skopeo copy oci-archive:..., podman load -i).
image: build
	$(GO) run ./test/image -binary bin/inferenceservice-operator -version $(VERSION) -o bin/inferenceservice-operator.oci.tar

# The same image with Docker, from the Dockerfile.
IMG ?= inferenceservice-operator:$(VERSION)
docker-build:
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

# A release into dist/$(VERSION) (test/release; nothing is pushed, .github/workflows/release.yaml
# pushes it): the image as one OCI index of linux/amd64 and linux/arm64, the chart and the
# manifests pinned to it by tag and digest, the plugin's archives for RELEASE_PLUGIN_PLATFORMS
# with a krew manifest, checksums.txt and RELEASE_NOTES.md. REGISTRY is where the workflow
# pushes the image (REGISTRY/inferenceservice-operator) and the chart (REGISTRY/charts).
REGISTRY ?= ghcr.io/example
RELEASE_PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64
RELEASE_IMAGE_ARCHS ?= amd64,arm64
# Empty is dist/$(VERSION).
DIST ?=
release:
	test/helm/build.sh $(HELM_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	$(GO) run ./test/release -version $(VERSION) -registry $(REGISTRY) -helm $(HELM_BIN) -kubectl $(KUBECTL_BIN) \
		-plugin-platforms $(RELEASE_PLUGIN_PLATFORMS) -image-archs $(RELEASE_IMAGE_ARCHS) $(if $(DIST),-o $(DIST))

# TestRelease at full size: the image for both architectures and the plugin for all six
# platforms (a cold build is about 25 minutes on 2 cores). make test runs it for the host's
# architecture alone (RELEASE_TEST_IMAGE_ARCHS, RELEASE_TEST_PLUGIN_PLATFORMS).
release-check:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	test/krew/build.sh $(KREW_BIN)
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) HELM_BIN=$(HELM_BIN) KREW_BIN=$(KREW_BIN) RELEASE_TEST_IMAGE_ARCHS=amd64,arm64 \
		RELEASE_TEST_PLUGIN_PLATFORMS=$(RELEASE_PLUGIN_PLATFORMS) $(GO) test -timeout 60m -count=1 -v -run 'TestRelease$$' ./test/release/

cluster:
	test/localcluster/build.sh

# kubectl from its Go module (test/kubectl, k8s.io/kubectl at the local cluster's v1.37.2), the
# one every test runs; cached.
kubectl:
	test/kubectl/build.sh $(KUBECTL_BIN)

# The helm CLI from its Go module (test/helm), for the chart's tests; cached.
helm:
	test/helm/build.sh $(HELM_BIN)

# krew and validate-krew-manifest from their Go module (test/krew), for TestRelease; cached.
krew:
	test/krew/build.sh $(KREW_BIN)

# Kueue's controller manager built from its module (test/kueue), for the Kueue e2e test: skipped
# while go.mod, go.sum and the script are unchanged (the first build takes minutes).
kueue:
	test/kueue/build.sh $(KUEUE_BIN)

# LeaderWorkerSet's controller manager built from its module (test/lws), for test/cluster's
# LeaderWorkerSet tests and the multi-node e2e tests (`make test` and `make e2e` build it too):
# skipped while go.mod, go.sum and the script are unchanged.
lws:
	test/lws/build.sh $(LWS_BIN)

# The Gateway API Inference Extension's endpoint picker (v1.5.0, the scoring picker) and the
# test gateway, built from test/epp, for test/cluster's TestEndpointPicker (`make test` builds
# them too; the test skips without EPP_BIN and GATEWAY_BIN, and fails under CI). Skipped while
# their inputs are unchanged.
epp:
	test/epp/build.sh $(EPP_BIN)

# Regenerate the CRD manifest from crd.Definition().
manifests:
	$(GO) test ./crd -run TestManifest -update

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(PLUGIN_DIR) && GOWORK=off $(GO) vet ./...

# The scale benchmark at full size (CI runs it at N=20 through go test).
bench:
	$(GO) run ./test/bench -n 100,1000

# The metrics adapter's reads among pods that never answer and impostor pods at issue 32's size:
# 1,000 models, 200 silent and 50 impostor pods, the default 10 s period (about 90 s). CI runs
# it at 100 models and a 1 s period through go test.
bench-adapter:
	METRICS_BENCH=full $(GO) test -count=1 -timeout 20m -v -run 'TestHPAReadsEveryModelAmongSilentAndImpostorPods$$' ./metrics/custommetrics/

# 10,000 InferenceServices: creation, rest and memory only (the baseline and the spec change
# would take hours on 2 cores); the controller manager's client is lifted so pods keep up. The
# operator runs in a kernel memory cgroup of the manifests' limit (BENCH_10K_LIMIT; needs root
# and cgroup v1: `make bench-10k BENCH_10K_LIMIT=` runs it without) and its memory is read again
# after a collection at rest. Its heap profiles, at rest and at the highest memory seen, land in
# bench-10k-profile/heap-10000.pprof and heap-10000-peak.pprof
# (go tool pprof -sample_index=inuse_space -top bench-10k-profile/heap-10000.pprof).
BENCH_10K_LIMIT ?= 256Mi
bench-10k:
	$(GO) run ./test/bench -n 10000 -skip-baseline -skip-change -qps 100 -cluster-args=--controller-qps=200 -settle $(if $(BENCH_10K_LIMIT),-memory-limit $(BENCH_10K_LIMIT)) -profile bench-10k-profile -out bench-10k.json

# The operator and KServe's controller (Standard mode) side by side, each on a fresh cluster per
# N. Not part of `make test`: KServe's manager is built from its module by test/kserve/build.sh
# (minutes the first time, cached in test/kserve/bin after that).
KSERVE_N ?= 100
bench-kserve:
	test/kserve/build.sh
	$(GO) run ./test/bench -system=operator,kserve -n $(KSERVE_N) -skip-change -out bench-kserve.json

FUZZTIME ?= 60s
# Every fuzz target in the tree, each for FUZZTIME (go test fuzzes one target per run); a
# target added without a line here fails the fuzz-list check below.
FUZZ_TARGETS = ./controller/reconcile:FuzzReconcileConverges ./crd:FuzzFromUnstructured ./crd:FuzzConversionRoundTrip
fuzz:
	@found=$$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs grep -ho '^func Fuzz[A-Za-z0-9_]*' | sed 's/^func //' | sort); \
	listed=$$(echo $(FUZZ_TARGETS) | tr ' ' '\n' | sed 's/.*://' | sort); \
	if [ "$$found" != "$$listed" ]; then echo "fuzz targets in the tree: $$found; in FUZZ_TARGETS: $$listed"; exit 1; fi
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t for $(FUZZTIME)"; \
		$(GO) test $${t%%:*} -run XXX -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# The fault suite at full size.
faults-full:
	FAULTS_N=500 FAULTS_KILLS=10 STORM_SECONDS=60 $(GO) test -timeout 60m -count=1 -v ./test/e2e/ -run 'Crash|Storm|APIServer|WatchExpiry'

# The soak (issue 38): two operator replicas under leader election, SOAK_MODELS models, a seeded
# workload and seeded faults for SOAK_MINUTES, every invariant checked after each fault and at
# the end (test/soak). SOAK_SEED replays a failed run's schedule. Its CI size, 2 minutes and 30
# models, is make soak-ci, and runs inside make test (SOAK_CI=1, beside the e2e package).
SOAK_MINUTES ?= 60
SOAK_MODELS ?= 1000
SOAK_SEED ?=
soak:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	set -o pipefail; LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) SOAK_MINUTES=$(SOAK_MINUTES) SOAK_MODELS=$(SOAK_MODELS) SOAK_SEED=$(SOAK_SEED) \
		$(GO) test -timeout $$(( $(SOAK_MINUTES) * 3 + 60 ))m -count=1 -v ./test/soak/
soak-ci:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) SOAK_CI=1 $(GO) test -timeout 15m -count=1 -v ./test/soak/

# The activator against the model's pod called directly, side by side in one run on the local
# cluster (test/bench/activator): latency added to a completion and a stream, whether a stream is
# buffered, requests per second at 16 and 128 in flight (20 s each), memory with 0, 100 and 1,000
# requests held, the first byte of 1, 10 and 100 requests at zero. About 4 minutes.
bench-activator:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) $(GO) run ./test/bench/activator

# The autoscaling signals under a bounded ramp (test/bench/ramp): one model per signal on one
# local cluster, the same load to each (2 requests a second doubled each minute for five
# minutes, then halved back), the time over the objective, GPU-minutes and pods over time; the
# plot into docs/ramp.svg. About 12 minutes.
bench-ramp:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) $(GO) run ./test/bench/ramp

# The Service route against the pool route, side by side on one cluster and one model (4 pods,
# 8 adapters): prefix-cache hit rate, time to a one-token answer p50/p99, requests per pod
# (test/routing). About 5 minutes.
bench-routing:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	test/epp/build.sh $(EPP_BIN)
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) EPP_BIN=$(EPP_BIN) GATEWAY_BIN=$(GATEWAY_BIN) $(GO) run ./test/routing

# The pool route's cost per model (test/bench/pickers): at each N of PICKERS_N, on a fresh
# cluster, N models each with a real picker process: create -> InferencePoolRoute p50/p99, the
# operator's writes and the objects per model, the pickers' RSS and CPU at rest and under a
# bounded load through the test gateway. An N whose pickers do not fit this machine's memory
# is extrapolated per picker from the largest N run, and says so.
PICKERS_N ?= 10,100,1000
bench-pickers:
	test/localcluster/build.sh $(LOCALCLUSTER_BIN)
	test/kubectl/build.sh $(KUBECTL_BIN)
	test/epp/build.sh $(EPP_BIN)
	LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) KUBECTL_BIN=$(KUBECTL_BIN) EPP_BIN=$(EPP_BIN) GATEWAY_BIN=$(GATEWAY_BIN) $(GO) run ./test/bench/pickers -n $(PICKERS_N)
