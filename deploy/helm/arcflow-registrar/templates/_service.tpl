{{/* What makes this chart the registrar's (the other templates are shared). */}}
{{- define "arcflow-registrar.component" -}}registrar{{- end -}}

{{- define "arcflow-registrar.envPrefix" -}}ARCFLOW_REGISTRAR_{{- end -}}

{{- define "arcflow-registrar.deploymentLabels" -}}{{- end -}}

{{/* rbac.clusterWide=false: register (cache, sweep) the sets of the namespaces its Roles cover. */}}
{{- define "arcflow-registrar.serviceEnv" -}}
{{- with .Values.workers }}
{{- with .converge }}
- name: ARCFLOW_REGISTRAR_CONVERGE_CONCURRENCY
  value: {{ . | quote }}
{{- end }}
{{- with .rpc }}
- name: ARCFLOW_REGISTRAR_RPC_CONCURRENCY
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- with include "arcflow-svc.watchedNamespaces" . }}
- name: ARCFLOW_REGISTRAR_NAMESPACES
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "arcflow-registrar.extraRbacNamespaces" -}}{{- end -}}

{{/* Reads the sets it registers and the GitHub credentials, CA and proxy credentials they
name; writes nothing. */}}
{{- define "arcflow-registrar.rules" -}}
- apiGroups: [actions.github.com]
  resources: [autoscalingrunnersets, ephemeralrunnersets, ephemeralrunners]
  verbs: [get, list, watch]
{{- /* list+watch: JIT requests read the credentials Secret from a watch of that one
  Secret (a metadata.name field selector), not a GET per request (ADR 0010). */}}
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
{{- /* The GitHub server CA an ARS names (githubServerTLS), read the same way (ADR 0038). */}}
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
{{- end -}}
