{{/* What makes this chart the reconciler's (the other templates are shared). */}}
{{- define "arcflow-reconciler.component" -}}reconciler{{- end -}}

{{- define "arcflow-reconciler.envPrefix" -}}ARCFLOW_RECONCILER_{{- end -}}

{{/* Where listener pods, their service accounts, Roles and config Secrets go. */}}
{{- define "arcflow-reconciler.controllerNamespace" -}}
{{- default .Release.Namespace .Values.controllerNamespace -}}
{{- end -}}

{{/*
The labels the upstream gha-runner-scale-set chart (and arcflow-runner-set) use to find the
controller's service account when controllerServiceAccount is not set.
*/}}
{{- define "arcflow-reconciler.deploymentLabels" -}}
app.kubernetes.io/part-of: gha-rs-controller
actions.github.com/controller-service-account-name: {{ include "arcflow-svc.serviceAccountName" . }}
actions.github.com/controller-service-account-namespace: {{ .Release.Namespace }}
{{- $watched := include "arcflow-svc.watchedNamespaces" . }}
{{- if and $watched (not (contains "," $watched)) }}
actions.github.com/controller-watch-single-namespace: {{ $watched }}
{{- end }}
{{- end -}}

{{- define "arcflow-reconciler.serviceEnv" -}}
{{- $listener := .Values.listener -}}
{{- with .Values.workers }}
- name: ARCFLOW_RECONCILER_WORKERS
  value: {{ . | quote }}
{{- end }}
{{- with .Values.workerCaps }}
{{- $pairs := list }}
{{- range $kind, $cap := . }}
{{- $pairs = append $pairs (printf "%s=%d" $kind (int $cap)) }}
{{- end }}
- name: ARCFLOW_RECONCILER_WORKER_CAPS
  value: {{ join "," $pairs | quote }}
{{- end }}
- name: ARCFLOW_RECONCILER_JOB_COMPLETED_GRACE_SECONDS
  value: {{ .Values.jobCompletedGraceSeconds | quote }}
- name: ARCFLOW_RECONCILER_REMOVAL_CONCURRENCY
  value: {{ .Values.removalConcurrency | quote }}
{{- /* The drain on SIGTERM fits the grace period: by default the grace period less 10 s (for
  the rest of the shutdown); an explicit drainSeconds must leave at least 5 s. */}}
{{- $grace := int .Values.terminationGracePeriodSeconds }}
{{- $drain := sub $grace 10 | int }}
{{- if lt $drain 0 }}{{ $drain = 0 }}{{ end }}
{{- if not (kindIs "invalid" .Values.drainSeconds) }}
{{- $drain = int .Values.drainSeconds }}
{{- if gt (add $drain 5) $grace }}
{{- fail (printf "drainSeconds (%d) must be at most terminationGracePeriodSeconds (%d) less 5" $drain $grace) }}
{{- end }}
{{- end }}
- name: ARCFLOW_RECONCILER_DRAIN_SECONDS
  value: {{ $drain | quote }}
- name: ARCFLOW_RECONCILER_CONTROLLER_NAMESPACE
  value: {{ include "arcflow-reconciler.controllerNamespace" . | quote }}
{{- /* rbac.clusterWide=false: cache only the namespaces its Roles cover (the controller
  namespace is added by the reconciler itself, for the kinds that live there). */}}
{{- with include "arcflow-svc.watchedNamespaces" . }}
- name: ARCFLOW_RECONCILER_NAMESPACES
  value: {{ . | quote }}
{{- end }}
- name: ARCFLOW_RECONCILER_LISTENER_IMAGE
  value: {{ include "arcflow-svc.image" (dict "root" . "image" $listener.image) | quote }}
{{- with $listener.imagePullSecrets }}
- name: ARCFLOW_RECONCILER_LISTENER_IMAGE_PULL_SECRETS
  value: {{ join "," . | quote }}
{{- end }}
- name: ARCFLOW_RECONCILER_LISTENER_ENTRYPOINT
  value: {{ $listener.entrypoint | quote }}
- name: ARCFLOW_RECONCILER_LISTENER_LOG_LEVEL
  value: {{ $listener.logLevel | quote }}
- name: ARCFLOW_RECONCILER_LISTENER_LOG_FORMAT
  value: {{ $listener.logFormat | quote }}
{{- with $listener.kube }}
- name: ARCFLOW_RECONCILER_LISTENER_KUBE_QPS
  value: {{ .qps | quote }}
- name: ARCFLOW_RECONCILER_LISTENER_KUBE_BURST
  value: {{ .burst | quote }}
{{- end }}
{{- with .Values.buildVersion }}
- name: ARCFLOW_RECONCILER_BUILD_VERSION
  value: {{ . | quote }}
{{- end }}
{{- $lnats := $listener.nats | default dict }}
{{- $lauth := $lnats.auth | default "userPassword" }}
{{- if not (has $lauth (list "userPassword" "credsFile")) }}
{{- fail (printf "listener.nats.auth must be userPassword or credsFile, got %q" $lauth) }}
{{- end }}
- name: ARCFLOW_RECONCILER_LISTENER_NATS_URL
  value: {{ $lnats.url | default (include "arcflow-svc.natsUrl" .) | quote }}
{{- with $lnats.existingSecret }}
- name: ARCFLOW_RECONCILER_LISTENER_NATS_SECRET
  value: {{ . | quote }}
- name: ARCFLOW_RECONCILER_LISTENER_NATS_AUTH
  value: {{ $lauth | quote }}
{{- end }}
{{- with $lnats.tlsSecret }}
- name: ARCFLOW_RECONCILER_LISTENER_NATS_TLS_SECRET
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "arcflow-reconciler.extraRbacNamespaces" -}}
{{- include "arcflow-reconciler.controllerNamespace" . -}}
{{- end -}}

{{/*
What the reconciler writes: the four kinds (with status and finalizers), runner and listener
pods, their Secrets (JIT config, listener config), and the listener's service account, Role and
RoleBinding; events to explain what it did. configmaps get: the GitHub server CA bundle.
A Role it creates can only grant what it holds itself (patch on ERS/ER), which it does.
No `update` (PUT) on any object: every write is a create, a merge patch or a delete. The one
`update` left is on the finalizers subresources, which the OwnerReferencesPermissionEnforcement
admission plugin asks for when a child's ownerReference sets blockOwnerDeletion.
*/}}
{{- define "arcflow-reconciler.rules" -}}
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets, ephemeralrunnersets, ephemeralrunners, autoscalinglisteners]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets/status, ephemeralrunnersets/status, ephemeralrunners/status, autoscalinglisteners/status]
  verbs: [get, patch]
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets/finalizers, ephemeralrunnersets/finalizers, ephemeralrunners/finalizers, autoscalinglisteners/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [get]
- apiGroups: [""]
  resources: [secrets, serviceaccounts]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
- apiGroups: [""]
  resources: [resourcequotas]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
