package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The chart's manifests decoded into the Kubernetes API's own Go types, the
// offline stand-in for the API server's validation (kubeconform's schemas
// cannot be downloaded here). sigs.k8s.io/yaml's UnmarshalStrict turns the
// YAML into JSON and decodes it with unknown and duplicate fields refused, so
// a misspelt key (restartPolicyy), one at the wrong level, or a value of the
// wrong type (a string where the API wants an integer, a quantity that does
// not parse) is an error, as kubectl apply --validate=strict would make it.

// manifest is one decoded document of helm template's output.
type manifest struct {
	source string // helm's "# Source:" line: which template rendered it
	kind   string
	obj    any // *appsv1.Deployment, *corev1.Service, …
}

// kinds maps apiVersion/kind to a new value of the type it decodes into.
// ServiceMonitor is prometheus-operator's, not in k8s.io/api: it decodes
// into serviceMonitor below, which has only the fields the chart renders.
var kinds = map[string]func() any{
	"apps/v1/Deployment": func() any { return &appsv1.Deployment{} },
	"v1/ServiceAccount":  func() any { return &corev1.ServiceAccount{} },
	"v1/Service":         func() any { return &corev1.Service{} },
	"v1/ConfigMap":       func() any { return &corev1.ConfigMap{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &serviceMonitor{} },
}

// serviceMonitor is the subset of monitoring.coreos.com/v1 ServiceMonitor
// the chart renders, field names as prometheus-operator spells them. Being
// the repository's own, it checks spelling and types, not the operator's
// schema.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// decodeStrict decodes every document of helm template's output into its
// API type, refusing unknown kinds, unknown fields and mistyped values.
func decodeStrict(out string) ([]manifest, error) {
	var ms []manifest
	for _, doc := range splitDocuments(out) {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("%s: %w", sourceOf(doc), err)
		}
		newObj, ok := kinds[head.APIVersion+"/"+head.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: no API type for apiVersion %q kind %q", sourceOf(doc), head.APIVersion, head.Kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", sourceOf(doc), head.Kind, err)
		}
		ms = append(ms, manifest{source: sourceOf(doc), kind: head.Kind, obj: obj})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no manifests in helm's output:\n%s", out)
	}
	return ms, nil
}

// splitDocuments splits a YAML stream at its "---" lines and drops
// documents that hold only comments.
func splitDocuments(out string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+out, "\n---") {
		if slices.ContainsFunc(strings.Split(d, "\n"), isContent) {
			docs = append(docs, d)
		}
	}
	return docs
}

func sourceOf(doc string) string {
	for _, l := range strings.Split(doc, "\n") {
		if s, ok := strings.CutPrefix(l, "# Source: "); ok {
			return s
		}
	}
	return "a document"
}

// renderTyped renders the chart with args and decodes it strictly.
func renderTyped(t *testing.T, args ...string) []manifest {
	t.Helper()
	base := []string{"template", "t", chartDir(t), "--namespace", "feeds", "--kube-version", kubeVersion}
	out, err := runHelm(t, append(base, args...)...)
	if err != nil {
		t.Fatalf("helm template %q: %v\n%s", args, err, out)
	}
	ms, err := decodeStrict(out)
	if err != nil {
		t.Fatalf("helm template %q: %v", args, err)
	}
	return ms
}

// typed returns the first manifest of type T.
func typed[T any](ms []manifest) (*T, bool) {
	for _, m := range ms {
		if o, ok := m.obj.(*T); ok {
			return o, true
		}
	}
	return nil, false
}

// chartVariants are the value sets every manifest is decoded under: the
// defaults and each option that changes what is rendered.
var chartVariants = []struct {
	name string
	args []string
}{
	{"defaults", nil},
	{"plain container", []string{"--set", "sidecar.native=false"}},
	{"token from a secret", []string{"--set", "tether.token.source=secret,tether.token.secret.name=feed-credentials"}},
	{"projected token", []string{"--set", "tether.token.source=serviceAccountToken,tether.token.serviceAccountToken.audience=feed"}},
	{"mutual TLS", []string{"--set", "tether.tls.secretName=tls,tether.tls.ca=ca.crt,tether.tls.cert=tls.crt,tether.tls.key=tls.key"}},
	{"monitoring", []string{"--set", "serviceMonitor.enabled=true,dashboard.enabled=true"}},
	{"env and extras", []string{"--set", "tether.env.TETHER_MAX_ATTEMPTS=10000000",
		"--set-string", "tether.env.TETHER_PING_INTERVAL=20s",
		"--set", "sidecar.extraEnv[0].name=TETHER_UPSTREAM_HEADERS,sidecar.extraEnv[0].valueFrom.secretKeyRef.name=api,sidecar.extraEnv[0].valueFrom.secretKeyRef.key=headers",
		"--set", "app.tetherURLEnv=FEED_URL,app.env[0].name=MODE,app.env[0].value=live"}},
	{"sse and listeners", []string{"--set", "tether.upstreamURL=https://feed.example.com/events",
		"--set", `tether.listen=sse://127.0.0.1:8081/events\,tcp://127.0.0.1:7000`}},
	{"digest, no app context", []string{"--set", "sidecar.image.digest=sha256:" + strings.Repeat("ab", 32),
		"--set", "app.securityContext=null"}},
	{"app may write its filesystem", []string{"--set", "app.securityContext.readOnlyRootFilesystem=false"}},
}

// TestChartDecodesStrictly decodes every manifest of every variant into the
// API types and checks the tether container through them.
func TestChartDecodesStrictly(t *testing.T) {
	for _, v := range chartVariants {
		t.Run(v.name, func(t *testing.T) {
			ms := renderTyped(t, v.args...)
			d, ok := typed[appsv1.Deployment](ms)
			if !ok {
				t.Fatalf("no Deployment among %d manifests", len(ms))
			}
			native := !slices.Contains(v.args, "sidecar.native=false")
			checkPod(t, &d.Spec.Template.Spec, native)
			if sa, ok := typed[corev1.ServiceAccount](ms); !ok || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Error("no ServiceAccount with automountServiceAccountToken: false")
			}
		})
	}
}

// checkPod checks the pod spec as the API server will read it.
func checkPod(t *testing.T, pod *corev1.PodSpec, native bool) {
	t.Helper()
	c, where := tetherContainer(t, pod, native)
	if native && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		t.Errorf("tether in %s without restartPolicy: Always: an init container that never exits keeps the pod from starting", where)
	}
	if !native && c.RestartPolicy != nil {
		t.Errorf("plain tether container has restartPolicy %q: the API server refuses it outside initContainers", *c.RestartPolicy)
	}
	checkTypedProbes(t, c)
	checkTypedSecurity(t, c.SecurityContext)
	if limit := c.Resources.Limits[corev1.ResourceMemory]; limit.Cmp(resource.MustParse("64Mi")) < 0 {
		t.Errorf("tether memory limit %s, want at least 64Mi", limit.String())
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("tether has a CPU limit: throttling delays heartbeats")
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Error("enableServiceLinks is not false")
	}
	for _, m := range c.VolumeMounts {
		if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) {
			t.Errorf("tether mounts volume %q, which the pod does not have", m.Name)
		}
	}
}

// tetherContainer finds tether in the list it belongs to, and fails when it
// is in the other one too.
func tetherContainer(t *testing.T, pod *corev1.PodSpec, native bool) (*corev1.Container, string) {
	t.Helper()
	find := func(list []corev1.Container) *corev1.Container {
		for i := range list {
			if list[i].Name == "tether" {
				return &list[i]
			}
		}
		return nil
	}
	in, other, where := find(pod.InitContainers), find(pod.Containers), "initContainers"
	if !native {
		in, other, where = other, in, "containers"
	}
	if in == nil {
		t.Fatalf("tether is not in %s (native=%v)", where, native)
	}
	if other != nil {
		t.Errorf("tether is in both initContainers and containers")
	}
	return in, where
}

func checkTypedProbes(t *testing.T, c *corev1.Container) {
	t.Helper()
	admin := intstr.FromString("tether-admin")
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == admin.StrVal && p.ContainerPort == 9090 }) {
		t.Errorf("tether ports %+v lack tether-admin 9090", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s is not an httpGet probe", name)
			continue
		}
		if p.HTTPGet.Port != admin {
			t.Errorf("%s port %s, want the named port tether-admin", name, p.HTTPGet.Port.String())
		}
		if p.PeriodSeconds < 1 || p.FailureThreshold < 1 {
			t.Errorf("%s periodSeconds %d failureThreshold %d", name, p.PeriodSeconds, p.FailureThreshold)
		}
	}
}

func checkTypedSecurity(t *testing.T, sc *corev1.SecurityContext) {
	t.Helper()
	switch {
	case sc == nil:
		t.Fatal("tether has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("runAsNonRoot is not true")
	case sc.RunAsUser == nil || *sc.RunAsUser != 65532:
		t.Error("runAsUser is not 65532, the image's user")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Error("capabilities.drop is not [ALL]")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("seccompProfile is not RuntimeDefault")
	}
}

// TestChartAppSecurityContext: the example app's restricted context is a
// value, overridable key by key or as a whole, and relaxing it leaves
// tether's alone.
func TestChartAppSecurityContext(t *testing.T) {
	app := func(ms []manifest) *corev1.Container {
		d, _ := typed[appsv1.Deployment](ms)
		for i, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "app" {
				return &d.Spec.Template.Spec.Containers[i]
			}
		}
		t.Fatal("no app container")
		return nil
	}
	sc := app(renderTyped(t)).SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("default app securityContext %+v, want the documented restricted one", sc)
	}
	ms := renderTyped(t, "--set", "app.securityContext.readOnlyRootFilesystem=false")
	if sc := app(ms).SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || *sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot {
		t.Errorf("app securityContext %+v, want readOnlyRootFilesystem false and the rest kept", sc)
	}
	ms = renderTyped(t, "--set", "app.securityContext=null")
	d, _ := typed[appsv1.Deployment](ms)
	if sc := app(ms).SecurityContext; sc != nil {
		t.Errorf("app securityContext %+v after app.securityContext=null, want none", sc)
	}
	if psc := d.Spec.Template.Spec.SecurityContext; psc != nil && psc.RunAsNonRoot != nil {
		t.Error("the pod's securityContext sets runAsNonRoot, which forces it on the app whatever app.securityContext says")
	}
	checkTypedSecurity(t, tetherOf(t, d).SecurityContext)
}

func tetherOf(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	c, _ := tetherContainer(t, &d.Spec.Template.Spec, true)
	return c
}

// TestDecodeStrictCatches breaks a rendered manifest one way at a time and
// expects decodeStrict to refuse it, so a passing TestChartDecodesStrictly
// means the API types were really checked.
func TestDecodeStrictCatches(t *testing.T) {
	out, err := runHelm(t, "template", "t", chartDir(t), "--kube-version", kubeVersion)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if _, err := decodeStrict(out); err != nil {
		t.Fatalf("the unbroken chart: %v", err)
	}
	tests := []struct{ name, old, new, want string }{
		{"misspelt field", "restartPolicy: Always", "restartPolicyy: Always", `unknown field "restartPolicyy"`},
		{"field at the wrong level", "            readOnlyRootFilesystem: true\n", "            readOnlyRootFilesystem: true\n            periodSeconds: 1\n", `unknown field "periodSeconds"`},
		{"string for an integer", "runAsUser: 65532", `runAsUser: "65532"`, "runAsUser"},
		{"quantity that does not parse", "memory: 256Mi", "memory: 256MB-ish", "quantities must match"},
		{"unknown kind", "kind: ServiceAccount", "kind: ServiceAcount", "no API type"},
		{"duplicate key", "restartPolicy: Always", "restartPolicy: Always\n          restartPolicy: Always", "already set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(out, tt.old) {
				t.Fatalf("the rendered chart no longer contains %q; update this case", tt.old)
			}
			_, err := decodeStrict(strings.Replace(out, tt.old, tt.new, 1))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("after replacing %q with %q: error %v, want one containing %q", tt.old, tt.new, err, tt.want)
			}
		})
	}
}

// TestChartMisspeltVariable: tether exits with code 2 on a TETHER_* name
// it does not read, so the schema refuses one at install time.
func TestChartMisspeltVariable(t *testing.T) {
	out, err := runHelm(t, "template", "t", chartDir(t), "--set-string", "tether.env.TETHER_PING_INTERVALL=20s")
	if err == nil {
		t.Fatal("helm template with tether.env.TETHER_PING_INTERVALL succeeded, want a refusal")
	}
	if !strings.Contains(out, "/tether/env") || !strings.Contains(out, "'TETHER_PING_INTERVALL' not allowed") {
		t.Errorf("the refusal does not name tether.env and the misspelt variable:\n%s", out)
	}
	renderTyped(t, "--set-string", "tether.env.TETHER_PING_INTERVAL=20s")
}

// TestChartIncludedBothWays renders a parent chart that includes
// tether.initContainers and tether.containers, with the sidecar native and
// not: tether must land in the list its mode needs without the parent
// changing its templates.
func TestChartIncludedBothWays(t *testing.T) {
	for _, native := range []bool{true, false} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			out, err := renderParent(t, parentBothLists, "--set", fmt.Sprintf("tether.sidecar.native=%v", native))
			if err != nil {
				t.Fatalf("helm template of the parent chart: %v\n%s", err, out)
			}
			ms, err := decodeStrict(out)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := typed[appsv1.Deployment](ms)
			pod := &d.Spec.Template.Spec
			checkPod(t, pod, native)
			if len(pod.Containers) != map[bool]int{true: 1, false: 2}[native] {
				t.Errorf("%d containers, want the parent's shop and, when not native, tether", len(pod.Containers))
			}
			if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != 45 {
				t.Errorf("terminationGracePeriodSeconds %v, want 45 from tether.terminationGracePeriodSeconds", pod.TerminationGracePeriodSeconds)
			}
		})
	}
}

// TestChartIncludedRefuses: what the named templates used to let through.
func TestChartIncludedRefuses(t *testing.T) {
	tests := []struct {
		name, deployment string
		args             []string
		want             string
	}{
		{"tether.sidecar while not native", parentDeployment, []string{"--set", "tether.sidecar.native=false"},
			"with sidecar.native=false include tether.containers"},
		{"drain longer than the grace period", parentBothLists, []string{"--set", "tether.tether.drainTimeoutSeconds=60"},
			"tether.drainTimeoutSeconds (60) must be below workload.terminationGracePeriodSeconds (45)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := renderParent(t, tt.deployment, tt.args...)
			if err == nil {
				t.Fatalf("helm template of the parent chart succeeded, want a refusal:\n%s", out)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("refusal without %q:\n%s", tt.want, out)
			}
		})
	}
}

// renderParent renders a chart "shop" that has tether as a dependency, with
// deployment as its pod template and parentValues plus a 45s grace period.
func renderParent(t *testing.T, deployment string, args ...string) (string, error) {
	t.Helper()
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "tether"), os.DirFS(chartDir(t))); err != nil {
		t.Fatalf("copy the chart: %v", err)
	}
	writeFile(t, filepath.Join(parent, "Chart.yaml"), "apiVersion: v2\nname: shop\nversion: 1.0.0\nappVersion: \"9.9.9\"\n")
	writeFile(t, filepath.Join(parent, "values.yaml"), strings.Replace(parentValues,
		"    enabled: false\n", "    enabled: false\n    terminationGracePeriodSeconds: 45\n", 1))
	writeFile(t, filepath.Join(parent, "templates", "deployment.yaml"), deployment)
	return runHelm(t, append([]string{"template", "shop", parent, "--kube-version", kubeVersion}, args...)...)
}

// parentBothLists is a parent's pod template as the chart's README shows it.
const parentBothLists = `apiVersion: apps/v1
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
      terminationGracePeriodSeconds: {{ include "tether.terminationGracePeriodSeconds" . }}
      initContainers:
        {{- include "tether.initContainers" . | nindent 8 }}
      containers:
        {{- include "tether.containers" . | nindent 8 }}
        - name: shop
          image: example.com/shop:1.0
      volumes:
        {{- include "tether.volumes" . | nindent 8 }}
`
