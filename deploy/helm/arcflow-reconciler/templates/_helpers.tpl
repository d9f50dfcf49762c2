{{/*
Shared by the arcflow-watcher, arcflow-registrar and arcflow-reconciler charts: the files
_helpers.tpl, deployment.yaml, serviceaccount.yaml, rbac.yaml and service.yaml are identical in
the three (a test checks it). What differs lives in _service.tpl (env prefix, extra env, RBAC
rules) and in values.yaml. Helm template names are global to a release, and the arcflow chart
loads the three charts together: so the shared templates are "arcflow-svc.*" (identical
everywhere) and each chart's own are "<chart name>.*", called as
include (printf "%s.serviceEnv" (include "arcflow-svc.own" $)) $
*/}}
{{/* "arcflow-<component>", from Chart.yaml's arcflow/component annotation (an alias does not change it). */}}
{{- define "arcflow-svc.own" -}}
{{- printf "arcflow-%s" (required "Chart.yaml needs the annotation arcflow/component" (index (default dict .Chart.Annotations) "arcflow/component")) -}}
{{- end -}}

{{- define "arcflow-svc.name" -}}
{{- default (include "arcflow-svc.own" .) .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<release>-<component>" (arcflow-reconciler for release arcflow), or the release name when
it already names the component. */}}
{{- define "arcflow-svc.fullname" -}}
{{- $component := include (printf "%s.component" (include "arcflow-svc.own" $)) . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains $component .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $component | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-svc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "arcflow-svc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "arcflow-svc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" (include "arcflow-svc.own" .) .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "arcflow-svc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ include (printf "%s.component" (include "arcflow-svc.own" $)) . }}
{{- end -}}

{{- define "arcflow-svc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "arcflow-svc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-svc.image" -}}
{{- $image := .image -}}
{{- $tag := default .root.Chart.AppVersion $image.tag -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
The namespaces the Roles cover when rbac.clusterWide is false: the watched ones, plus what the
service needs besides (<chart>.extraRbacNamespaces in _service.tpl, e.g. the reconciler's listener namespace).
*/}}
{{- define "arcflow-svc.rbacNamespaces" -}}
{{- $namespaces := list -}}
{{- range (concat (splitList "," (include "arcflow-svc.watchedNamespaces" .)) (splitList "," (include (printf "%s.extraRbacNamespaces" (include "arcflow-svc.own" $)) .))) -}}
{{- if and . (not (has . $namespaces)) -}}{{- $namespaces = append $namespaces . -}}{{- end -}}
{{- end -}}
{{- join "," $namespaces -}}
{{- end -}}

{{/* The namespaces the service works in: empty when cluster-wide. */}}
{{- define "arcflow-svc.watchedNamespaces" -}}
{{- if not .Values.rbac.clusterWide -}}
{{- if .Values.rbac.namespaces -}}{{- join "," .Values.rbac.namespaces -}}{{- else -}}{{- .Release.Namespace -}}{{- end -}}
{{- end -}}
{{- end -}}

{{/*
NATS connection settings (ARCFLOW_NATS_*, read by arcflow.common.nats.settings). Credentials
come from an existing Secret, never from values: a password as an env var from secretKeyRef, a
creds file mounted read-only.
*/}}
{{- define "arcflow-svc.validateNats" -}}
{{- $auth := .Values.nats.auth -}}
{{- if not (has $auth.mode (list "none" "userPassword" "credsFile")) -}}
{{- fail (printf "nats.auth.mode must be none, userPassword or credsFile, not %q" $auth.mode) -}}
{{- end -}}
{{- if and (ne $auth.mode "none") (not $auth.existingSecret) -}}
{{- fail (printf "nats.auth.existingSecret is required when nats.auth.mode is %s: name the Secret that holds the NATS credentials" $auth.mode) -}}
{{- end -}}
{{- $tls := .Values.nats.tls -}}
{{- if and $tls.enabled (not $tls.existingSecret) -}}
{{- fail "nats.tls.existingSecret is required when nats.tls.enabled is true: name the Secret that holds the CA (and client certificate)" -}}
{{- end -}}
{{- if and $tls.enabled (ne (empty $tls.certKey) (empty $tls.keyKey)) -}}
{{- fail "nats.tls.certKey and nats.tls.keyKey must be set together (client certificate and its key)" -}}
{{- end -}}
{{- end -}}

{{/*
The NATS URL: global.arcflow.natsUrl when set (the arcflow umbrella chart gives every service
and listener pod one URL that way), else nats.url.
*/}}
{{- define "arcflow-svc.natsUrl" -}}
{{- $url := .Values.nats.url -}}
{{- with .Values.global -}}{{- with .arcflow -}}{{- with .natsUrl -}}{{- $url = . -}}{{- end -}}{{- end -}}{{- end -}}
{{- required "nats.url is required" $url -}}
{{- end -}}

{{- define "arcflow-svc.natsEnv" -}}
- name: ARCFLOW_NATS_URL
  value: {{ include "arcflow-svc.natsUrl" . | quote }}
- name: ARCFLOW_NATS_NAME
  value: {{ include "arcflow-svc.fullname" . | quote }}
- name: ARCFLOW_NATS_REPLICAS
  value: {{ .Values.nats.replicas | default 1 | quote }}
{{- $auth := .Values.nats.auth }}
{{- if eq $auth.mode "userPassword" }}
- name: ARCFLOW_NATS_USER
  valueFrom:
    secretKeyRef:
      name: {{ $auth.existingSecret }}
      key: {{ $auth.userKey }}
- name: ARCFLOW_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $auth.existingSecret }}
      key: {{ $auth.passwordKey }}
{{- else if eq $auth.mode "credsFile" }}
- name: ARCFLOW_NATS_CREDS_FILE
  value: {{ printf "/etc/arcflow/nats-creds/%s" $auth.credsKey | quote }}
{{- end }}
{{- $tls := .Values.nats.tls }}
{{- if $tls.enabled }}
- name: ARCFLOW_NATS_TLS_CA
  value: {{ printf "/etc/arcflow/nats-tls/%s" $tls.caKey | quote }}
{{- if $tls.certKey }}
- name: ARCFLOW_NATS_TLS_CERT
  value: {{ printf "/etc/arcflow/nats-tls/%s" $tls.certKey | quote }}
- name: ARCFLOW_NATS_TLS_KEY
  value: {{ printf "/etc/arcflow/nats-tls/%s" $tls.keyKey | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "arcflow-svc.natsVolumes" -}}
{{- $auth := .Values.nats.auth }}
{{- if eq $auth.mode "credsFile" }}
- name: nats-creds
  secret:
    secretName: {{ $auth.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $auth.credsKey }}
        path: {{ $auth.credsKey }}
{{- end }}
{{- $tls := .Values.nats.tls }}
{{- if $tls.enabled }}
- name: nats-tls
  secret:
    secretName: {{ $tls.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $tls.caKey }}
        path: {{ $tls.caKey }}
      {{- if $tls.certKey }}
      - key: {{ $tls.certKey }}
        path: {{ $tls.certKey }}
      - key: {{ $tls.keyKey }}
        path: {{ $tls.keyKey }}
      {{- end }}
{{- end }}
{{- end -}}

{{- define "arcflow-svc.natsVolumeMounts" -}}
{{- if eq .Values.nats.auth.mode "credsFile" }}
- name: nats-creds
  mountPath: /etc/arcflow/nats-creds
  readOnly: true
{{- end }}
{{- if .Values.nats.tls.enabled }}
- name: nats-tls
  mountPath: /etc/arcflow/nats-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Env vars of the service's own settings: ports, logging, instance, `settings`. */}}
{{- define "arcflow-svc.commonEnv" -}}
{{- $prefix := include (printf "%s.envPrefix" (include "arcflow-svc.own" $)) . -}}
- name: ARCFLOW_KUBE_IN_CLUSTER
  value: "true"
{{- with .Values.kube }}
- name: ARCFLOW_KUBE_QPS
  value: {{ .qps | quote }}
- name: ARCFLOW_KUBE_BURST
  value: {{ .burst | quote }}
{{- end }}
- name: {{ $prefix }}HEALTH_PORT
  value: {{ .Values.health.port | quote }}
- name: {{ $prefix }}METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: {{ $prefix }}LOG_JSON
  value: {{ .Values.log.json | quote }}
- name: {{ $prefix }}LOG_LEVEL
  value: {{ .Values.log.level | quote }}
{{- if (.Values.profiling | default dict).enabled }}
- name: {{ $prefix }}PROFILING
  value: "true"
{{- end }}
- name: {{ $prefix }}INSTANCE
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- range $key, $value := (default dict .Values.settings) }}
- name: {{ printf "%s%s" $prefix (upper $key) }}
  value: {{ toString $value | quote }}
{{- end }}
{{- end -}}
