{{- define "arcflow.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: arcflow
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: arcflow
{{- end -}}

{{- define "arcflow.monitoringLabels" -}}
{{ include "arcflow.labels" . }}
{{- with .Values.monitoring.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Where listener pods run: the reconciler's controllerNamespace, else the release's. */}}
{{- define "arcflow.controllerNamespace" -}}
{{- $reconciler := default dict .Values.reconciler -}}
{{- default .Release.Namespace $reconciler.controllerNamespace -}}
{{- end -}}

{{/*
The NATS users: name, the namespace of its Secret and the component reading it. The user
names and the password variables are those of deploy/nats/authorization.conf.
*/}}
{{- define "arcflow.natsUsers" -}}
{{- $users := list -}}
{{- range $service := list "watcher" "registrar" "reconciler" -}}
{{- $users = append $users (dict "service" $service "namespace" $.Release.Namespace) -}}
{{- end -}}
{{- $users = append $users (dict "service" "listener" "namespace" (include "arcflow.controllerNamespace" .)) -}}
{{- $users = append $users (dict "service" "auditor" "namespace" $.Release.Namespace) -}}
{{- toYaml (dict "users" $users) -}}
{{- end -}}
