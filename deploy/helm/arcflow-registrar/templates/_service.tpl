{{/* What makes this chart the registrar's (the other templates are shared). */}}
{{- define "arcflow-svc.component" -}}registrar{{- end -}}

{{- define "arcflow-svc.envPrefix" -}}ARCFLOW_REGISTRAR_{{- end -}}

{{- define "arcflow-svc.deploymentLabels" -}}{{- end -}}

{{- define "arcflow-svc.serviceEnv" -}}{{- end -}}

{{- define "arcflow-svc.extraRbacNamespaces" -}}{{- end -}}

{{/* Reads the sets it registers and the GitHub credentials they name; writes nothing. */}}
{{- define "arcflow-svc.rules" -}}
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets, ephemeralrunnersets, ephemeralrunners]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end -}}
