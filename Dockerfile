# tether's container image: a static Go binary on distroless, run as uid 65532.
#
#   docker build --build-arg VERSION=v1.2.3 -t tether:v1.2.3 .
#
# BuildKit cross-compiles in the builder's own platform (--platform=$BUILDPLATFORM,
# GOOS/GOARCH from TARGETOS/TARGETARCH), so multi-arch builds need no emulation.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
# CGO_ENABLED=0: a static binary, since the final image has no libc.
# -trimpath keeps build paths out of the binary; -s -w drop the symbol tables.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/tether ./cmd/tether

# distroless static: CA certificates, tzdata and /etc/passwd with the nonroot
# user (65532), nothing else: no shell, no package manager. Pinned by digest so
# a rebuild of the same commit gets the same base. This is the multi-arch index
# digest of gcr.io/distroless/static-debian12:nonroot as pinned by several
# public Dockerfiles in 2026; it could not be checked against the registry
# from the machine this file was written on. To refresh it:
#   crane digest gcr.io/distroless/static-debian12:nonroot
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab

ARG VERSION=dev
ARG REVISION=unknown
# SPDX id of LICENSE.
ARG LICENSES=Apache-2.0
LABEL org.opencontainers.image.source="https://github.com/tetherproxy/tether" \
      org.opencontainers.image.title="tether" \
      org.opencontainers.image.description="Sidecar WebSocket proxy: a stable local socket for the app, a resilient upstream connection" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

COPY --from=build /out/tether /tether
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# 8080: the app listener, 9090: /healthz, /readyz, /metrics. Both bind
# 127.0.0.1 by default; in a container set TETHER_LISTEN and TETHER_ADMIN_LISTEN
# (the Helm chart binds the admin server to 0.0.0.0 for kubelet probes).
EXPOSE 8080 9090
ENTRYPOINT ["/tether"]
