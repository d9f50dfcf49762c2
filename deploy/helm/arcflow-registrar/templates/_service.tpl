{{/* What makes this chart the registrar's (the other templates are shared). */}}
{{- define "arcflow-registrar.component" -}}registrar{{- end -}}

{{- define "arcflow-registrar.envPrefix" -}}ARCFLOW_REGISTRAR_{{- end -}}

{{- define "arcflow-registrar.deploymentLabels" -}}{{- end -}}

{{- define "arcflow-registrar.serviceEnv" -}}{{- end -}}

{{- define "arcflow-registrar.extraRbacNamespaces" -}}{{- end -}}

{{/* Reads the sets it registers and the GitHub credentials they name; writes nothing. */}}
{{- define "arcflow-registrar.rules" -}}
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets, ephemeralrunnersets, ephemeralrunners]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end -}}
