{{/*
Hand-written helpers of the generated chart (hack/chart/files): the
templates beside this file are generated from deploy/ by `make helm-chart`.
*/}}

{{/* The labels Helm charts add by convention to every object they install. */}}
{{- define "memcached-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The manager image: repository:tag, and @digest when given. */}}
{{- define "memcached-operator.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else -}}
{{ printf "%s:%s" .Values.image.repository $tag }}
{{- end -}}
{{- end }}

{{/* Combinations of values the schema cannot express. */}}
{{- define "memcached-operator.validate" -}}
{{- if and (gt (int .Values.manager.replicas) 1) (not .Values.manager.leaderElection) -}}
{{- fail "manager.replicas > 1 needs manager.leaderElection: true: managers without a leader would all reconcile every Memcached" -}}
{{- end -}}
{{- end }}
