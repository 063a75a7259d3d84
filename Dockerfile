# syntax=docker/dockerfile:1
# The operator's image for users with Docker (or BuildKit, Podman, Kaniko): three static
# binaries (the operator, its metrics adapter and its activator) on distroless, running as
# nonroot. Without Docker, `make image` builds the equivalent OCI image (test/image,
# go-containerregistry) on an empty base.
#
#   docker build --build-arg VERSION=v0.1.0 -t registry.example.com/isvc-operator:v0.1.0 .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Dependencies first: a code change does not re-download modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/inferenceservice-operator . && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/inferenceservice-metrics-adapter ./metrics/adapter && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/inferenceservice-activator ./controller/activator/cmd

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.source="https://github.com/example/inferenceservice-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.title="inferenceservice-operator"
COPY --from=build /out/inferenceservice-operator /inferenceservice-operator
# The metrics adapter (manifests/metrics-adapter runs it with this image's command overridden).
COPY --from=build /out/inferenceservice-metrics-adapter /inferenceservice-metrics-adapter
# The activator (manifests/activator runs it with this image's command overridden).
COPY --from=build /out/inferenceservice-activator /inferenceservice-activator
USER 65532:65532
ENTRYPOINT ["/inferenceservice-operator"]
