{{/*
The release's base name: the release name when it contains the chart's
name (helm install wasmsched ... gives wasmsched-scheduler,
wasmsched-config), else <release>-wasmsched.
*/}}
{{- define "wasmsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The scheduler's name: its Deployment, service account, roles and lease. */}}
{{- define "wasmsched.scheduler" -}}
{{- include "wasmsched.fullname" . }}-scheduler
{{- end -}}

{{- define "wasmsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wasmsched.scheduler" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wasmsched.labels" -}}
{{ include "wasmsched.selectorLabels" . }}
app.kubernetes.io/part-of: wasmsched
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The Kubernetes minor the image is built for: kubernetesMinor, else the
cluster's. A minor no image is built for fails the release, naming the
supported ones (values.schema.json lists them too).
*/}}
{{- define "wasmsched.minor" -}}
{{- $supported := list "1.37" "1.36" "1.35" -}}
{{- $minor := .Values.kubernetesMinor -}}
{{- if not $minor -}}
{{- $minor = printf "%s.%s" .Capabilities.KubeVersion.Major (trimSuffix "+" .Capabilities.KubeVersion.Minor) -}}
{{- end -}}
{{- if not (has $minor $supported) -}}
{{- fail (printf "kubernetesMinor: no wasmsched image is built for Kubernetes %s (the cluster's unless set); images exist for %s" $minor (join ", " $supported)) -}}
{{- end -}}
{{- $minor -}}
{{- end -}}

{{- define "wasmsched.image" -}}
{{- $tag := .Values.image.tag | default (printf "v%s-k8s%s" .Chart.AppVersion (include "wasmsched.minor" .)) -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
The kinds policies may read, as RBAC rules: get, list, watch on each
group/version/resource of .Values.context, grouped by API group. Checked
here as well as by the schema (helm's --skip-schema-validation skips that).
*/}}
{{- define "wasmsched.contextRules" -}}
{{- $groups := dict -}}
{{- range $i, $gvr := .Values.context -}}
{{- $parts := splitList "/" $gvr -}}
{{- $resource := last $parts -}}
{{- if or (lt (len $parts) 2) (gt (len $parts) 3) (contains "*" $gvr) (eq $resource "secrets") -}}
{{- fail (printf "context[%d]: %q is not a kind policies may read (group/version/resource; never secrets or a wildcard)" $i $gvr) -}}
{{- end -}}
{{- $group := ternary (first $parts) "" (eq (len $parts) 3) -}}
{{- $_ := set $groups $group (append (get $groups $group | default list) $resource | uniq) -}}
{{- end -}}
{{- range $group := keys $groups | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: [{{ range $j, $r := get $groups $group | sortAlpha }}{{ if $j }}, {{ end }}{{ $r | quote }}{{ end }}]
  verbs: ["get", "list", "watch"]
{{- end -}}
{{- end -}}
