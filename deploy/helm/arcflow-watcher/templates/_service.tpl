{{/* What makes this chart the watcher's (the other templates are shared). */}}
{{- define "arcflow-watcher.component" -}}watcher{{- end -}}

{{- define "arcflow-watcher.envPrefix" -}}ARCFLOW_WATCHER_{{- end -}}

{{- define "arcflow-watcher.deploymentLabels" -}}{{- end -}}

{{- define "arcflow-watcher.serviceEnv" -}}
{{- with include "arcflow-svc.watchedNamespaces" . }}
- name: ARCFLOW_WATCHER_NAMESPACES
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Read-only: the four kinds, and the pods and secrets arcflow owns. */}}
{{- define "arcflow-watcher.rules" -}}
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets, ephemeralrunnersets, ephemeralrunners, autoscalinglisteners]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods, secrets]
  verbs: [get, list, watch]
{{- end -}}

{{- define "arcflow-watcher.extraRbacNamespaces" -}}{{- end -}}
