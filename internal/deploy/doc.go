// Package deploy holds no code, only tests of the files that deploy tether,
// checked against tether itself:
//
//   - the Dockerfile: a static CGO_ENABLED=0 build of ./cmd/tether in a
//     builder stage, a distroless static nonroot final stage pinned by digest,
//     numeric USER 65532, ENTRYPOINT ["/tether"], the listener and admin ports
//     exposed, OCI labels, and a .dockerignore allowlist;
//   - the Helm chart in helm/tether: helm lint, and helm template for the
//     default values and each option (plain container, token from a Secret or
//     a projected service account token, ServiceMonitor, dashboard, inclusion
//     of tether.sidecar in another chart), with the rendered pod checked for
//     the native sidecar, loopback app listener, admin probes, security
//     context and token mount, and values.schema.json checked to refuse bad
//     values;
//   - the image without a container engine: the binary built with the
//     Dockerfile's own go build line (flags and environment read from it),
//     checked static and stripped, and run as the image runs it, in an empty
//     read-only root filesystem holding only /tether and a CA bundle, as uid
//     65532, in a mount namespace of its own (util-linux's unshare and mount,
//     coreutils' chroot; root needed): /healthz, one message through a TLS
//     upstream verified by the bundle (TETHER_UPSTREAM_CA_FILE), and a
//     bundle of another CA refused;
//   - every manifest the chart renders, decoded strictly into the
//     k8s.io/api types (unknown, duplicate and mistyped fields fail);
//   - the desktop service files in docs/desktop: the systemd user unit
//     through systemd-analyze --user verify (which must print nothing), the
//     launchd agent parsed as a property list with known launchd keys;
//   - every TETHER_* name in the chart, the Dockerfile or the desktop files is
//     a variable that cmd/tether reads, since tether refuses to start on an
//     unknown one.
//
// The chart tests need the helm CLI (on PATH or in $(go env GOPATH)/bin;
// .ci/run installs it), the image test root and the isolation tools, the unit
// check systemd-analyze (Debian's systemd, which .ci/run installs). Without
// them they are skipped, saying why, unless the CI variable is set: CI must
// not pass without having rendered the chart, run the image and verified the
// unit.
//
// Concurrency: the tests run helm, go build, tether and systemd-analyze as
// child processes, wait for each, and stop tether by its own pid.
package deploy
