package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helmInstall is how .ci/run installs helm; the skip message repeats it.
const helmInstall = "cd /tmp && GOFLAGS=-mod=mod go install helm.sh/helm/v3/cmd/helm@v3.22.0"

// kubeVersion is what helm template assumes the cluster runs; helm's own
// default (1.20 for a go-installed helm) predates native sidecars.
const kubeVersion = "1.31.0"

// helm returns the helm binary: on PATH, else in $(go env GOPATH)/bin. When
// it is missing the test fails under CI and is skipped elsewhere.
func helm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "helm")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("helm not found on PATH or in $(go env GOPATH)/bin, and CI is set: CI must render the chart (install: %s)", helmInstall)
	}
	reason := fmt.Sprintf("helm not found on PATH or in $(go env GOPATH)/bin; chart tests skipped (install: %s; or run .ci/run)", helmInstall)
	skipped.Add(reason)
	t.Skip(reason)
	return ""
}

func chartDir(t *testing.T) string {
	return filepath.Join(repoRoot(t), "helm", "tether")
}

// runHelm runs helm with args and returns stdout, and stderr on failure.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.String(), err
	}
	return stdout.String(), nil
}

// render runs helm template on the chart with --set style arguments and
// returns the documents.
func render(t *testing.T, args ...string) []node {
	t.Helper()
	base := []string{"template", "t", chartDir(t), "--namespace", "feeds", "--kube-version", kubeVersion}
	out, err := runHelm(t, append(base, args...)...)
	if err != nil {
		t.Fatalf("helm template %q: %v\n%s", args, err, out)
	}
	return documents(out)
}

// podSpec returns the Deployment's pod spec.
func podSpec(t *testing.T, docs []node) node {
	t.Helper()
	spec := kind(docs, "Deployment").path("spec", "template", "spec")
	if spec == nil {
		t.Fatal("no Deployment with a pod spec rendered")
	}
	return spec
}

func TestHelmLint(t *testing.T) {
	if out, err := runHelm(t, "lint", "--strict", chartDir(t)); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

func TestChartNativeSidecar(t *testing.T) {
	spec := podSpec(t, render(t))
	c := container(spec, "initContainers", "tether")
	if c == nil {
		t.Fatalf("no tether in initContainers:\n%s", strings.Join(spec, "\n"))
	}
	if v, _ := c.field("restartPolicy"); v != "Always" {
		t.Errorf("tether restartPolicy = %q, want Always (a native sidecar)", v)
	}
	if container(spec, "containers", "tether") != nil {
		t.Error("tether is also among the containers")
	}
	if container(spec, "containers", "app") == nil {
		t.Error("no app container")
	}
	checkSidecar(t, spec, c)
}

// An SSE upstream and several listeners: the schema takes the http(s) URL,
// TETHER_LISTEN carries the whole list, and the app is given the first
// entry's URL, an sse:// entry as the http:// URL an EventSource opens.
func TestChartSSEAndListeners(t *testing.T) {
	tests := []struct{ listen, appURL string }{
		{`sse://127.0.0.1:8081/events\,tcp://127.0.0.1:7000`, "http://127.0.0.1:8081/events"},
		{`127.0.0.1:8080\,sse://127.0.0.1:8081/events`, "ws://127.0.0.1:8080"},
		{`tcp://127.0.0.1:7000`, "tcp://127.0.0.1:7000"},
		{`unix:///run/tether/tether.sock`, "unix:///run/tether/tether.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			spec := podSpec(t, render(t, "--set", "tether.upstreamURL=https://feed.example.com/events",
				"--set", "tether.listen="+tt.listen, "--set", "app.tetherURLEnv=FEED_URL"))
			c := container(spec, "initContainers", "tether")
			if v, _ := env(c, "TETHER_UPSTREAM_URL"); v != "https://feed.example.com/events" {
				t.Errorf("TETHER_UPSTREAM_URL = %q", v)
			}
			if v, _ := env(c, "TETHER_LISTEN"); v != strings.ReplaceAll(tt.listen, `\,`, ",") {
				t.Errorf("TETHER_LISTEN = %q, want the whole list %q", v, tt.listen)
			}
			if v, _ := env(container(spec, "containers", "app"), "FEED_URL"); v != tt.appURL {
				t.Errorf("the app's FEED_URL = %q, want %q", v, tt.appURL)
			}
		})
	}
}

func TestChartPlainContainer(t *testing.T) {
	spec := podSpec(t, render(t, "--set", "sidecar.native=false"))
	c := container(spec, "containers", "tether")
	if c == nil {
		t.Fatalf("no tether among the containers:\n%s", strings.Join(spec, "\n"))
	}
	if _, ok := c.field("restartPolicy"); ok {
		t.Error("a plain tether container has a restartPolicy")
	}
	if container(spec, "initContainers", "tether") != nil {
		t.Error("tether is also among the initContainers")
	}
	checkSidecar(t, spec, c)
}

// checkSidecar checks what holds for tether in either form.
func checkSidecar(t *testing.T, spec, c node) {
	t.Helper()
	checkListeners(t, c)
	checkProbes(t, c)
	checkSecurityContext(t, c.get("securityContext"))
	if c.path("resources", "requests") == nil || c.path("resources", "limits") == nil {
		t.Error("tether has no resource requests and limits")
	}
	if v, _ := spec.field("enableServiceLinks"); v != "false" {
		t.Errorf("enableServiceLinks = %q, want false: service links add TETHER_* variables tether would report", v)
	}
	checkGracePeriod(t, spec, c)
}

func checkListeners(t *testing.T, c node) {
	t.Helper()
	if v, _ := env(c, "TETHER_ADMIN_LISTEN"); v != "0.0.0.0:9090" {
		t.Errorf("TETHER_ADMIN_LISTEN = %q, want 0.0.0.0:9090 (kubelet probes the pod IP)", v)
	}
	listen, _ := env(c, "TETHER_LISTEN")
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("TETHER_LISTEN = %q, want a loopback address", listen)
	}
	if v, _ := env(c, "TETHER_UPSTREAM_URL"); !strings.HasPrefix(v, "wss://") {
		t.Errorf("TETHER_UPSTREAM_URL = %q, want the default wss:// placeholder", v)
	}
	if v, _ := c.get("ports").item("name: tether-admin").field("containerPort"); v != "9090" {
		t.Errorf("port tether-admin is %q, want containerPort 9090", v)
	}
}

func checkProbes(t *testing.T, c node) {
	t.Helper()
	for probe, path := range map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		get := c.path(probe, "httpGet")
		if v, _ := get.field("port"); v != "tether-admin" {
			t.Errorf("%s port = %q, want the admin port tether-admin", probe, v)
		}
		if v, _ := get.field("path"); v != path {
			t.Errorf("%s path = %q, want %s", probe, v, path)
		}
	}
}

func checkSecurityContext(t *testing.T, sc node) {
	t.Helper()
	want := map[string]string{
		"runAsNonRoot":             "true",
		"runAsUser":                "65532",
		"readOnlyRootFilesystem":   "true",
		"allowPrivilegeEscalation": "false",
	}
	for key, value := range want {
		if v, _ := sc.field(key); v != value {
			t.Errorf("securityContext.%s = %q, want %s", key, v, value)
		}
	}
	if drop := sc.path("capabilities", "drop").items(); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("securityContext.capabilities.drop = %q, want [ALL]", drop)
	}
	if v, _ := sc.get("seccompProfile").field("type"); v != "RuntimeDefault" {
		t.Errorf("securityContext.seccompProfile.type = %q, want RuntimeDefault", v)
	}
}

// checkGracePeriod: the kubelet must not kill tether before its drain ends.
func checkGracePeriod(t *testing.T, spec, c node) {
	t.Helper()
	v, _ := env(c, "TETHER_DRAIN_TIMEOUT")
	drain, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("TETHER_DRAIN_TIMEOUT = %q: %v", v, err)
	}
	g, _ := spec.field("terminationGracePeriodSeconds")
	grace, err := strconv.Atoi(g)
	if err != nil || time.Duration(grace)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds = %q, want more than TETHER_DRAIN_TIMEOUT %s", g, drain)
	}
}

func TestChartNoTokenByDefault(t *testing.T) {
	spec := podSpec(t, render(t))
	c := container(spec, "initContainers", "tether")
	if v, ok := env(c, "TETHER_UPSTREAM_TOKEN_FILE"); ok {
		t.Errorf("TETHER_UPSTREAM_TOKEN_FILE = %q without a token source", v)
	}
	if spec.get("volumes").item("name: tether-token") != nil {
		t.Error("a tether-token volume without a token source")
	}
}

func TestChartTokenFromSecret(t *testing.T) {
	spec := podSpec(t, render(t, "--set", "tether.token.source=secret,tether.token.secret.name=feed-credentials,tether.token.secret.key=bearer"))
	vol := checkTokenMount(t, spec)
	secret := vol.get("secret")
	if v, _ := secret.field("secretName"); v != "feed-credentials" {
		t.Errorf("token volume secretName = %q, want feed-credentials", v)
	}
	if v, _ := secret.get("items").item("key: bearer").field("path"); v != "token" {
		t.Errorf("secret key bearer is mounted as %q, want token", v)
	}
}

func TestChartTokenFromServiceAccount(t *testing.T) {
	spec := podSpec(t, render(t, "--set", "tether.token.source=serviceAccountToken,tether.token.serviceAccountToken.audience=feed.example.com,tether.token.serviceAccountToken.expirationSeconds=900"))
	vol := checkTokenMount(t, spec)
	sa := vol.path("projected", "sources").item("serviceAccountToken:").get("serviceAccountToken")
	want := map[string]string{"path": "token", "audience": "feed.example.com", "expirationSeconds": "900"}
	for key, value := range want {
		if v, _ := sa.field(key); v != value {
			t.Errorf("projected serviceAccountToken.%s = %q, want %s", key, v, value)
		}
	}
}

// checkTokenMount checks TETHER_UPSTREAM_TOKEN_FILE names the token in a
// read-only mount of the tether-token volume, and returns that volume.
func checkTokenMount(t *testing.T, spec node) node {
	t.Helper()
	c := container(spec, "initContainers", "tether")
	file, ok := env(c, "TETHER_UPSTREAM_TOKEN_FILE")
	if !ok {
		t.Fatal("no TETHER_UPSTREAM_TOKEN_FILE")
	}
	mount := c.get("volumeMounts").item("name: tether-token")
	if v, _ := mount.field("mountPath"); v != filepath.Dir(file) || filepath.Base(file) != "token" {
		t.Errorf("TETHER_UPSTREAM_TOKEN_FILE = %q, tether-token mounted at %q", file, v)
	}
	if v, _ := mount.field("readOnly"); v != "true" {
		t.Errorf("tether-token mount readOnly = %q, want true", v)
	}
	vol := spec.get("volumes").item("name: tether-token")
	if vol == nil {
		t.Fatal("no tether-token volume in the pod")
	}
	return vol
}

func TestChartEnvMap(t *testing.T) {
	spec := podSpec(t, render(t,
		"--set", "tether.env.TETHER_MAX_ATTEMPTS=10000000",
		"--set-string", "tether.env.TETHER_PING_INTERVAL=20s"))
	c := container(spec, "initContainers", "tether")
	for name, want := range map[string]string{"TETHER_MAX_ATTEMPTS": "10000000", "TETHER_PING_INTERVAL": "20s"} {
		if v, _ := env(c, name); v != want {
			t.Errorf("%s = %q, want %q", name, v, want)
		}
	}
}

// TestChartRenderedVariablesExist renders every option and checks each
// variable name the pod gets is one tether reads.
func TestChartRenderedVariablesExist(t *testing.T) {
	known := knownVariables(t)
	nameLine := regexp.MustCompile(`- name: (TETHER_\w+)`)
	variants := [][]string{
		nil,
		{"--set", "sidecar.native=false"},
		{"--set", "tether.token.source=secret,tether.token.secret.name=s"},
		{"--set", "tether.token.source=serviceAccountToken"},
		{"--set", "tether.tls.secretName=tls,tether.tls.ca=ca.crt,tether.tls.cert=tls.crt,tether.tls.key=tls.key"},
	}
	for _, args := range variants {
		for _, doc := range render(t, args...) {
			for _, m := range nameLine.FindAllStringSubmatch(strings.Join(doc, "\n"), -1) {
				if !known[m[1]] {
					t.Errorf("with %q the pod gets %s, which tether does not read", args, m[1])
				}
			}
		}
	}
}

func TestChartServiceMonitor(t *testing.T) {
	if kind(render(t), "ServiceMonitor") != nil {
		t.Error("a ServiceMonitor is rendered by default")
	}
	docs := render(t, "--set", "serviceMonitor.enabled=true")
	endpoint := kind(docs, "ServiceMonitor").path("spec", "endpoints").item("port: tether-admin")
	if v, _ := endpoint.field("path"); v != "/metrics" {
		t.Errorf("ServiceMonitor endpoint on tether-admin has path %q, want /metrics", v)
	}
	svc := kind(docs, "Service").get("spec")
	if v, _ := svc.get("ports").item("name: tether-admin").field("targetPort"); v != "tether-admin" {
		t.Errorf("metrics Service targetPort = %q, want tether-admin", v)
	}
	if v, _ := svc.get("selector").field("app.kubernetes.io/name"); v != "tether" {
		t.Errorf("metrics Service selects app.kubernetes.io/name=%q, want the workload's tether", v)
	}
}

// dashboardMetrics are the metrics docs/design.md "Operations" names; the
// dashboard must chart each of them.
var dashboardMetrics = []string{
	"tether_sessions", "tether_upstream_dials_total", "tether_upstream_disconnects_total",
	"tether_reconnect_seconds_bucket", "tether_messages_total", "tether_outbox_messages",
	"tether_outbox_dropped_total", "tether_duplicates_dropped_total", "tether_gaps_total",
	"tether_replayed_messages_total",
}

func TestChartDashboard(t *testing.T) {
	if kind(render(t), "ConfigMap") != nil {
		t.Error("a dashboard ConfigMap is rendered by default")
	}
	cm := kind(render(t, "--set", "dashboard.enabled=true"), "ConfigMap")
	if v, _ := cm.path("metadata", "labels").field("grafana_dashboard"); v != "1" {
		t.Errorf("dashboard label grafana_dashboard = %q, want 1", v)
	}
	exprs := dashboardExprs(t, cm.path("data", "tether.json"))
	for _, metric := range dashboardMetrics {
		if !strings.Contains(exprs, metric+"{") {
			t.Errorf("no dashboard panel queries %s", metric)
		}
	}
	for _, q := range []string{"histogram_quantile(0.5,", "histogram_quantile(0.99,"} {
		if !strings.Contains(exprs, q) {
			t.Errorf("no dashboard panel computes %s…) of tether_reconnect_seconds", q)
		}
	}
}

// dashboardExprs parses the dashboard JSON of the ConfigMap and returns its
// panels' PromQL joined by newlines.
func dashboardExprs(t *testing.T, block node) string {
	t.Helper()
	var text strings.Builder
	for _, l := range block {
		text.WriteString(strings.TrimPrefix(l, strings.Repeat(" ", block.base())) + "\n")
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(text.String()), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	return strings.Join(exprs, "\n")
}

// TestChartRefuses checks values.schema.json and the templates' own checks
// refuse bad values with a message that names them.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		set, want string
	}{
		{"sidecar.native=maybe", "/sidecar/native"},
		{"sidecar.nativ=true", "nativ"},
		{"tether.logLevel=loud", "/tether/logLevel"},
		{"tether.token.source=vault", "/tether/token/source"},
		{"tether.upstreamURL=ftp://feed.example.com", "/tether/upstreamURL"},
		{"tether.env.upstream=x", "'upstream' not allowed"},
		{"tether.env.TETHER_LISTEN=0.0.0.0:8080", "tether.env.TETHER_LISTEN"},
		{"tether.token.source=secret", "tether.token.secret.name"},
		{"tether.tls.secretName=tls,tether.tls.cert=tls.crt", "tether.tls.key"},
		{"workload.terminationGracePeriodSeconds=10", "terminationGracePeriodSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			out, err := runHelm(t, "template", "t", chartDir(t), "--set", tt.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded, want a refusal", tt.set)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("helm template --set %s failed without naming %s:\n%s", tt.set, tt.want, out)
			}
		})
	}
}

// TestChartIncludedInAnotherChart renders a parent chart that has tether as a
// dependency and includes tether.sidecar and tether.volumes in its own pod:
// the chart's 0.1 contract, which still holds for a native sidecar
// (TestChartIncludedBothWays has the current one).
func TestChartIncludedInAnotherChart(t *testing.T) {
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "tether"), os.DirFS(chartDir(t))); err != nil {
		t.Fatalf("copy the chart: %v", err)
	}
	writeFile(t, filepath.Join(parent, "Chart.yaml"), "apiVersion: v2\nname: shop\nversion: 1.0.0\nappVersion: \"9.9.9\"\n")
	writeFile(t, filepath.Join(parent, "values.yaml"), parentValues)
	writeFile(t, filepath.Join(parent, "templates", "deployment.yaml"), parentDeployment)

	out, err := runHelm(t, "template", "shop", parent, "--kube-version", kubeVersion)
	if err != nil {
		t.Fatalf("helm template of the parent chart: %v\n%s", err, out)
	}
	docs := documents(out)
	if n := strings.Count(out, "kind: Deployment"); n != 1 {
		t.Errorf("%d Deployments rendered, want only the parent's (tether.workload.enabled=false)", n)
	}
	spec := podSpec(t, docs)
	c := container(spec, "initContainers", "tether")
	if v, _ := c.field("restartPolicy"); v != "Always" {
		t.Errorf("included tether restartPolicy = %q, want Always", v)
	}
	if v, _ := env(c, "TETHER_UPSTREAM_URL"); v != "wss://orders.internal/v2" {
		t.Errorf("included TETHER_UPSTREAM_URL = %q, want the parent's value", v)
	}
	if v, _ := c.field("image"); !strings.HasSuffix(v, ":0.1.0") {
		t.Errorf("included image = %q, want tether's appVersion 0.1.0 as tag, not the parent's", v)
	}
	checkTokenMount(t, spec)
	checkSecurityContext(t, c.get("securityContext"))
}

const parentValues = `tether:
  workload:
    enabled: false
  tether:
    upstreamURL: wss://orders.internal/v2
    token:
      source: serviceAccountToken
      serviceAccountToken:
        audience: orders
`

const parentDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  selector:
    matchLabels:
      app: shop
  template:
    metadata:
      labels:
        app: shop
    spec:
      enableServiceLinks: false
      initContainers:
        {{- include "tether.sidecar" . | nindent 8 }}
      containers:
        - name: shop
          image: example.com/shop:1.0
      volumes:
        {{- include "tether.volumes" . | nindent 8 }}
`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChartNotes renders NOTES.txt, which helm template leaves out: a copy
// of the chart renders it through tpl inside an ordinary template.
func TestChartNotes(t *testing.T) {
	tests := []struct {
		name, kube string
		set        string
		want, not  []string
	}{
		{"old cluster", "1.28.0", "sidecar.native=true",
			[]string{"native sidecars\nneed 1.29", "tether.upstreamURL is still the placeholder"}, nil},
		{"plain container", "1.28.0", "sidecar.native=false,tether.upstreamURL=wss://feed.acme.test/v1",
			[]string{"plain container", "ws://127.0.0.1:8080", "wss://feed.acme.test/v1"}, []string{"WARNING"}},
		{"monitoring", "1.31.0", "serviceMonitor.enabled=true,dashboard.enabled=true",
			[]string{"native sidecar", "ServiceMonitor t-tether", "ConfigMap t-tether-dashboard"}, []string{"need 1.29"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes := renderNotes(t, "--kube-version", tt.kube, "--set", tt.set)
			for _, w := range tt.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(notes, n) {
					t.Errorf("NOTES contain %q:\n%s", n, notes)
				}
			}
		})
	}
}

func renderNotes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tether")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatalf("copy the chart: %v", err)
	}
	// .Files cannot read templates/, so the notes move to the chart's root.
	if err := os.Rename(filepath.Join(dir, "templates", "NOTES.txt"), filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "templates", "notes.yaml"), "notes: {{ tpl (.Files.Get \"notes.txt\") . | toJson }}\n")
	out, err := runHelm(t, append([]string{"template", "t", dir, "--show-only", "templates/notes.yaml"}, args...)...)
	if err != nil {
		t.Fatalf("render NOTES.txt: %v\n%s", err, out)
	}
	var notes string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "notes: "); ok {
			if err := json.Unmarshal([]byte(v), &notes); err != nil {
				t.Fatalf("rendered notes %q: %v", v, err)
			}
		}
	}
	if notes == "" {
		t.Fatalf("no notes rendered:\n%s", out)
	}
	return notes
}
