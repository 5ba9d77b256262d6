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
//   - every TETHER_* name in the chart or the Dockerfile is a variable that
//     cmd/tether reads, since tether refuses to start on an unknown one.
//
// The chart tests need the helm CLI (on PATH or in $(go env GOPATH)/bin;
// .ci/run installs it). Without it they are skipped, unless the CI variable is
// set: CI must not pass without having rendered the chart.
//
// Concurrency: the tests run helm as child processes and wait for each.
package deploy
