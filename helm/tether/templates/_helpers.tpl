{{/*
Names and labels of this chart's own objects.
*/}}
{{- define "tether.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tether.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tether.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tether.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tether.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tether.labels" -}}
helm.sh/chart: {{ include "tether.chart" . }}
{{ include "tether.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tether.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tether.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The two public templates, tether.sidecar and tether.volumes, take the root
context of whichever chart includes them. tether's own templates pass theirs.
A parent chart that has tether as a dependency named (or aliased) "tether"
passes its own, and they switch to the subchart's context, .Subcharts.tether,
whose values are tether's defaults with the parent's overrides merged in and
whose Chart is tether's (so the image tag defaults to tether's appVersion).
*/}}

{{/*
Where tether goes in a pod depends on sidecar.native, so a parent chart
includes two templates, one in each list, and each renders tether only where
it belongs: tether.initContainers renders the native sidecar (restartPolicy:
Always) and nothing when sidecar.native is false; tether.containers renders
the plain container and nothing when sidecar.native is true. Flipping
sidecar.native then moves tether without editing the parent's pod:

  initContainers:
    {{- include "tether.initContainers" . | nindent 4 }}
  containers:
    {{- include "tether.containers" . | nindent 4 }}
    - name: my-app
      …
  terminationGracePeriodSeconds: {{ include "tether.terminationGracePeriodSeconds" . }}
  volumes:
    {{- include "tether.volumes" . | nindent 4 }}

An empty initContainers: is null, which Kubernetes takes as no list.
*/}}
{{- define "tether.initContainers" -}}
{{- $ctx := . }}
{{- if ne .Chart.Name "tether" }}
{{- $ctx = required "tether.initContainers: add the tether chart as a dependency named tether" (index (.Subcharts | default dict) "tether") }}
{{- end }}
{{- if $ctx.Values.sidecar.native }}
{{- include "tether.container" $ctx | trim }}
{{- end }}
{{- end }}

{{- define "tether.containers" -}}
{{- $ctx := . }}
{{- if ne .Chart.Name "tether" }}
{{- $ctx = required "tether.containers: add the tether chart as a dependency named tether" (index (.Subcharts | default dict) "tether") }}
{{- end }}
{{- if not $ctx.Values.sidecar.native }}
{{- include "tether.container" $ctx | trim }}
{{- end }}
{{- end }}

{{/*
tether.sidecar: the native sidecar as one list item, for a pod's
initContainers (the chart's 0.1 contract). It cannot know which list it is
in, so with sidecar.native=false it refuses, rather than leave a container
that never exits in initContainers (the pod would never start): use
tether.initContainers and tether.containers.
*/}}
{{- define "tether.sidecar" -}}
{{- $ctx := . }}
{{- if ne .Chart.Name "tether" }}
{{- $ctx = required "tether.sidecar: add the tether chart as a dependency named tether" (index (.Subcharts | default dict) "tether") }}
{{- end }}
{{- if not $ctx.Values.sidecar.native }}
{{- fail "tether.sidecar renders a native sidecar for initContainers; with sidecar.native=false include tether.containers in the pod's containers and tether.initContainers in its initContainers (see tether's README)" }}
{{- end }}
{{- include "tether.container" $ctx | trim }}
{{- end }}

{{/*
tether.volumes: the volumes the sidecar mounts (token, TLS), as YAML list
items; empty when it mounts none.
*/}}
{{- define "tether.volumes" -}}
{{- $ctx := . }}
{{- if ne .Chart.Name "tether" }}
{{- $ctx = required "tether.volumes: add the tether chart as a dependency named tether" (index (.Subcharts | default dict) "tether") }}
{{- end }}
{{- include "tether.podVolumes" $ctx | trim }}
{{- end }}

{{/*
tether.terminationGracePeriodSeconds: workload.terminationGracePeriodSeconds,
for the pod spec of a chart that includes tether. tether.container refuses a
drain that does not end within it (tether.checkDrain), so a pod whose grace
period is rendered from this template cannot have tether killed mid-drain.
*/}}
{{- define "tether.terminationGracePeriodSeconds" -}}
{{- $ctx := . }}
{{- if ne .Chart.Name "tether" }}
{{- $ctx = required "tether.terminationGracePeriodSeconds: add the tether chart as a dependency named tether" (index (.Subcharts | default dict) "tether") }}
{{- end }}
{{- int $ctx.Values.workload.terminationGracePeriodSeconds }}
{{- end }}

{{/*
The remaining templates take tether's own context.
*/}}
{{- define "tether.image" -}}
{{- $image := .Values.sidecar.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{- define "tether.adminListen" -}}
{{- $admin := .Values.tether.admin }}
{{- if contains ":" $admin.host }}
{{- printf "[%s]:%d" $admin.host (int $admin.port) }}
{{- else }}
{{- printf "%s:%d" $admin.host (int $admin.port) }}
{{- end }}
{{- end }}

{{/*
tether.appURL: the URL the app connects to, from the first entry of
TETHER_LISTEN: host:port is ws://host:port, an sse:// entry is the http://
URL an EventSource opens, any other scheme (ws://, tcp://, unix://) as
written.
*/}}
{{- define "tether.appURL" -}}
{{- $listen := trim (first (splitList "," .Values.tether.listen)) }}
{{- if hasPrefix "sse://" $listen }}
{{- printf "http://%s" (trimPrefix "sse://" $listen) }}
{{- else if contains "://" $listen }}
{{- $listen }}
{{- else }}
{{- printf "ws://%s" $listen }}
{{- end }}
{{- end }}

{{/*
tether.envValue renders one tether.env value as a quoted string. Numbers from
values files arrive as float64, which would print 10000000 as 1e+07.
*/}}
{{- define "tether.envValue" -}}
{{- if kindIs "float64" . }}
{{- int64 . | toString | quote }}
{{- else }}
{{- toString . | quote }}
{{- end }}
{{- end }}

{{/*
tether.env: the TETHER_* variables. First-class values come first; tether.env
adds the rest and may not repeat a variable the chart already sets, since
Kubernetes would silently keep only one of the two.
*/}}
{{- define "tether.env" -}}
{{- $t := .Values.tether }}
{{- $set := list "TETHER_UPSTREAM_URL" "TETHER_LISTEN" "TETHER_ADMIN_LISTEN" "TETHER_DRAIN_TIMEOUT" "TETHER_LOG_LEVEL" "TETHER_LOG_FORMAT" -}}
- name: TETHER_UPSTREAM_URL
  value: {{ required "tether.upstreamURL is required" $t.upstreamURL | quote }}
- name: TETHER_LISTEN
  value: {{ required "tether.listen is required" $t.listen | quote }}
- name: TETHER_ADMIN_LISTEN
  value: {{ include "tether.adminListen" . | quote }}
- name: TETHER_DRAIN_TIMEOUT
  value: {{ printf "%ds" (int $t.drainTimeoutSeconds) | quote }}
- name: TETHER_LOG_LEVEL
  value: {{ $t.logLevel | quote }}
- name: TETHER_LOG_FORMAT
  value: {{ $t.logFormat | quote }}
{{- if ne $t.token.source "none" }}
{{- $set = append $set "TETHER_UPSTREAM_TOKEN_FILE" }}
- name: TETHER_UPSTREAM_TOKEN_FILE
  value: {{ printf "%s/token" (trimSuffix "/" $t.token.mountPath) | quote }}
{{- end }}
{{- if $t.tls.secretName }}
{{- $dir := trimSuffix "/" $t.tls.mountPath }}
{{- if $t.tls.ca }}
{{- $set = append $set "TETHER_UPSTREAM_CA_FILE" }}
- name: TETHER_UPSTREAM_CA_FILE
  value: {{ printf "%s/%s" $dir $t.tls.ca | quote }}
{{- end }}
{{- if $t.tls.cert }}
{{- $set = append $set "TETHER_UPSTREAM_CERT_FILE" }}
- name: TETHER_UPSTREAM_CERT_FILE
  value: {{ printf "%s/%s" $dir $t.tls.cert | quote }}
{{- end }}
{{- if $t.tls.key }}
{{- $set = append $set "TETHER_UPSTREAM_KEY_FILE" }}
- name: TETHER_UPSTREAM_KEY_FILE
  value: {{ printf "%s/%s" $dir $t.tls.key | quote }}
{{- end }}
{{- end }}
{{- range $name, $value := $t.env }}
{{- if has $name $set }}
{{- fail (printf "tether.env.%s: the chart already sets %s from a first-class value (see values.yaml); set that instead" $name $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ include "tether.envValue" $value }}
{{- end }}
{{- with .Values.sidecar.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "tether.checkTLS" -}}
{{- $tls := .Values.tether.tls }}
{{- if and $tls.secretName (not (or $tls.ca $tls.cert $tls.key)) }}
{{- fail "tether.tls.secretName is set but none of tether.tls.ca, cert, key names a key of it" }}
{{- end }}
{{- if ne (empty $tls.cert) (empty $tls.key) }}
{{- fail "tether.tls.cert and tether.tls.key go together (mutual TLS): set both or neither" }}
{{- end }}
{{- if and (not $tls.secretName) (or $tls.ca $tls.cert $tls.key) }}
{{- fail "tether.tls.ca, cert and key are keys of tether.tls.secretName, which is empty" }}
{{- end }}
{{- end }}

{{/*
tether.checkDrain: the kubelet sends SIGKILL when the pod's grace period ends,
so a drain longer than it is cut off and the last apps lose their close frame.
It runs wherever tether is rendered, the named templates included: a parent
chart's pod has no other way to tell tether its grace period than
workload.terminationGracePeriodSeconds.
*/}}
{{- define "tether.checkDrain" -}}
{{- $grace := int .Values.workload.terminationGracePeriodSeconds }}
{{- $drain := int .Values.tether.drainTimeoutSeconds }}
{{- if le $grace $drain }}
{{- fail (printf "tether.drainTimeoutSeconds (%d) must be below workload.terminationGracePeriodSeconds (%d), the pod's grace period: the kubelet kills tether before its drain ends. When tether is included in another chart, set tether.workload.terminationGracePeriodSeconds to that pod's grace period, or render it with tether.terminationGracePeriodSeconds" $drain $grace) }}
{{- end }}
{{- end }}

{{- define "tether.checkToken" -}}
{{- $token := .Values.tether.token }}
{{- if and (eq $token.source "secret") (not $token.secret.name) }}
{{- fail "tether.token.source is secret: set tether.token.secret.name" }}
{{- end }}
{{- end }}

{{- define "tether.volumeMounts" -}}
{{- $t := .Values.tether }}
{{- if ne $t.token.source "none" }}
- name: tether-token
  mountPath: {{ $t.token.mountPath }}
  readOnly: true
{{- end }}
{{- if $t.tls.secretName }}
- name: tether-tls
  mountPath: {{ $t.tls.mountPath }}
  readOnly: true
{{- end }}
{{- with .Values.sidecar.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "tether.podVolumes" -}}
{{- $t := .Values.tether }}
{{- if eq $t.token.source "secret" }}
- name: tether-token
  secret:
    secretName: {{ $t.token.secret.name }}
    # Only the token key, under the fixed name TETHER_UPSTREAM_TOKEN_FILE points at.
    items:
      - key: {{ $t.token.secret.key }}
        path: token
    # Readable by uid 65532 without relying on the pod's fsGroup (a parent
    # chart's pod may not set one); only tether's container mounts it.
    defaultMode: 0444
{{- else if eq $t.token.source "serviceAccountToken" }}
- name: tether-token
  projected:
    sources:
      - serviceAccountToken:
          path: token
          {{- with $t.token.serviceAccountToken.audience }}
          audience: {{ . | quote }}
          {{- end }}
          expirationSeconds: {{ int $t.token.serviceAccountToken.expirationSeconds }}
    defaultMode: 0444
{{- end }}
{{- if $t.tls.secretName }}
- name: tether-tls
  secret:
    secretName: {{ $t.tls.secretName }}
    items:
      {{- range list $t.tls.ca $t.tls.cert $t.tls.key | compact }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
    defaultMode: 0444
{{- end }}
{{- end }}

{{- define "tether.probe" -}}
httpGet:
  path: {{ .path }}
  port: tether-admin
periodSeconds: {{ int .timing.periodSeconds }}
timeoutSeconds: {{ int .timing.timeoutSeconds }}
failureThreshold: {{ int .timing.failureThreshold }}
{{- end }}

{{/*
tether.container: the container itself; see tether.initContainers.
*/}}
{{- define "tether.container" -}}
{{- include "tether.checkToken" . }}
{{- include "tether.checkTLS" . }}
{{- include "tether.checkDrain" . }}
{{- $s := .Values.sidecar -}}
- name: {{ $s.name }}
  image: {{ include "tether.image" . }}
  imagePullPolicy: {{ $s.image.pullPolicy }}
  {{- if $s.native }}
  # A native sidecar: started (startup probe passed) before the app
  # containers, stopped after them.
  restartPolicy: Always
  {{- end }}
  env:
    {{- include "tether.env" . | trim | nindent 4 }}
  ports:
    # The app listener (TETHER_LISTEN) is on loopback and not declared.
    - name: tether-admin
      containerPort: {{ int .Values.tether.admin.port }}
      protocol: TCP
  startupProbe:
    {{- include "tether.probe" (dict "path" "/healthz" "timing" $s.probes.startup) | nindent 4 }}
  livenessProbe:
    {{- include "tether.probe" (dict "path" "/healthz" "timing" $s.probes.liveness) | nindent 4 }}
  readinessProbe:
    {{- include "tether.probe" (dict "path" "/readyz" "timing" $s.probes.readiness) | nindent 4 }}
  {{- with include "tether.volumeMounts" . | trim }}
  volumeMounts:
    {{- . | nindent 4 }}
  {{- end }}
  {{- with $s.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $s.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
