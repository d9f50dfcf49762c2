{{/*
The runner pod template of the AutoscalingRunnerSet: the `template` value, plus what the
container mode needs (dind sidecar, container hooks, work volume) and the GitHub server CA
bundle. Whatever the user already set (an env var, a volume or a mount of the same name) wins.
Order follows the upstream chart (docs/migrating-from-arc.md, "Chart rendering"): in a container
mode the runner container comes first; volumes are the CA bundle, then the mode's volumes (a
volume of yours with the same name takes its place), then your other volumes. Where upstream
renders a runner container with nothing but a name (a container mode and no "runner" in
template.spec.containers) or a runner without an image, this chart gives it the default runner
image and command, so the pod can start.
*/}}

{{- define "arcflow-runner-set.defaultRunnerImage" -}}ghcr.io/actions/actions-runner:latest{{- end -}}

{{/* Appends .item to the list .obj[.key] unless an entry with the same name is there. */}}
{{- define "arcflow-runner-set.ensureNamed" -}}
{{- $items := default list (get .obj .key) -}}
{{- $found := false -}}
{{- range $items -}}{{- if eq .name $.item.name -}}{{- $found = true -}}{{- end -}}{{- end -}}
{{- if not $found -}}{{- $_ := set .obj .key (append $items .item) -}}{{- end -}}
{{- end -}}

{{/*
The pod volumes: (dict "user" <template volumes> "first" <volumes the chart puts first, in
order>). A user volume named like one of "first" replaces it in place; the other user volumes
follow in their order. Output: {"volumes": [...]}.
*/}}
{{- define "arcflow-runner-set.orderVolumes" -}}
{{- $byName := dict -}}
{{- range .user -}}{{- $_ := set $byName (toString .name) . -}}{{- end -}}
{{- $volumes := list -}}
{{- $taken := dict -}}
{{- range .first -}}
{{- $volumes = append $volumes (get $byName .name | default .) -}}
{{- $_ := set $taken .name true -}}
{{- end -}}
{{- range .user -}}
{{- if not (hasKey $taken (toString .name)) -}}{{- $volumes = append $volumes . -}}{{- end -}}
{{- end -}}
{{- toYaml (dict "volumes" $volumes) -}}
{{- end -}}

{{- define "arcflow-runner-set.runnerTemplate" -}}
{{- $values := default dict .Values.template -}}
{{- $template := dict -}}
{{- with $values.metadata -}}
{{- $metadata := dict -}}
{{- with .labels -}}{{- $_ := set $metadata "labels" . -}}{{- end -}}
{{- with .annotations -}}{{- $_ := set $metadata "annotations" . -}}{{- end -}}
{{- if $metadata -}}{{- $_ := set $template "metadata" $metadata -}}{{- end -}}
{{- end -}}
{{- $spec := deepCopy (default dict $values.spec) -}}
{{- $mode := include "arcflow-runner-set.containerMode" . -}}
{{- $runner := dict -}}
{{- $others := list -}}
{{- range (default list $spec.containers) -}}
{{- if and (eq .name "runner") (not $runner) -}}
{{- $runner = deepCopy . -}}
{{- else if and (eq $mode "dind") (eq .name "dind") -}}
{{- /* the chart's own dind container replaces one of that name, as upstream */ -}}
{{- else -}}
{{- $others = append $others (deepCopy .) -}}
{{- end -}}
{{- end -}}
{{- if and $mode (not $runner) -}}
{{- $runner = dict "name" "runner" "command" (list "/home/runner/run.sh") -}}
{{- end -}}
{{- if and $mode (not $runner.image) -}}
{{- $_ := set $runner "image" (include "arcflow-runner-set.defaultRunnerImage" .) -}}
{{- end -}}
{{- $runnerImage := default (include "arcflow-runner-set.defaultRunnerImage" .) $runner.image -}}
{{- $userVolumes := default list $spec.volumes -}}
{{- $first := list -}}

{{- if not $spec.restartPolicy -}}{{- $_ := set $spec "restartPolicy" "Never" -}}{{- end -}}
{{- if not $spec.serviceAccountName -}}
{{- if include "arcflow-runner-set.isKubeMode" . -}}
{{- $_ := set $spec "serviceAccountName" (include "arcflow-runner-set.kubeModeName" .) -}}
{{- else -}}
{{- $_ := set $spec "serviceAccountName" (include "arcflow-runner-set.noPermissionName" .) -}}
{{- end -}}
{{- end -}}

{{- with .Values.githubServerTLS -}}
{{- if and .runnerMountPath .certificateFrom -}}
{{- $ref := required "githubServerTLS.certificateFrom.configMapKeyRef is required with githubServerTLS.runnerMountPath" .certificateFrom.configMapKeyRef -}}
{{- $key := required "githubServerTLS.certificateFrom.configMapKeyRef.key is required" $ref.key -}}
{{- $name := required "githubServerTLS.certificateFrom.configMapKeyRef.name is required" $ref.name -}}
{{- $first = append $first (dict "name" "github-server-tls-cert" "configMap" (dict "name" $name "items" (list (dict "key" $key "path" $key)))) -}}
{{- end -}}
{{- end -}}

{{- $sidecar := dict -}}
{{- if eq $mode "dind" -}}
{{- $initContainers := list -}}
{{- $initContainers = append $initContainers (dict
      "name" "init-dind-externals"
      "image" $runnerImage
      "command" (list "cp")
      "args" (list "-r" "/home/runner/externals/." "/home/runner/tmpDir/")
      "volumeMounts" (list (dict "name" "dind-externals" "mountPath" "/home/runner/tmpDir"))) -}}
{{- $dind := dict
      "name" "dind"
      "image" "docker:dind"
      "args" (list "dockerd" "--host=unix:///var/run/docker.sock" "--group=$(DOCKER_GROUP_GID)")
      "env" (list (dict "name" "DOCKER_GROUP_GID" "value" "123"))
      "securityContext" (dict "privileged" true)
      "volumeMounts" (list
        (dict "name" "work" "mountPath" "/home/runner/_work")
        (dict "name" "dind-sock" "mountPath" "/var/run")
        (dict "name" "dind-externals" "mountPath" "/home/runner/externals")) -}}
{{- $nativeSidecar := ge (int (regexFind "[0-9]+" .Capabilities.KubeVersion.Minor)) 29 -}}
{{- if $nativeSidecar -}}
{{- $_ := set $dind "restartPolicy" "Always" -}}
{{- $_ := set $dind "startupProbe" (dict
      "exec" (dict "command" (list "docker" "info"))
      "initialDelaySeconds" 0 "failureThreshold" 24 "periodSeconds" 5) -}}
{{- $initContainers = append $initContainers $dind -}}
{{- else -}}
{{- $sidecar = $dind -}}
{{- end -}}
{{- range (default list $spec.initContainers) -}}{{- $initContainers = append $initContainers . -}}{{- end -}}
{{- $_ := set $spec "initContainers" $initContainers -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "DOCKER_HOST" "value" "unix:///var/run/docker.sock")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS" "value" "120")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "work" "mountPath" "/home/runner/_work")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "dind-sock" "mountPath" "/var/run")) -}}
{{- range $volume := list "dind-sock" "dind-externals" "work" -}}
{{- $first = append $first (dict "name" $volume "emptyDir" dict) -}}
{{- end -}}
{{- end -}}

{{- if eq $mode "kubernetes" -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" "/home/runner/k8s/index.js")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "work" "mountPath" "/home/runner/_work")) -}}
{{- $claim := default dict .Values.containerMode.kubernetesModeWorkVolumeClaim -}}
{{- $first = append $first (dict "name" "work" "ephemeral" (dict "volumeClaimTemplate" (dict "spec" $claim))) -}}
{{- end -}}

{{- if eq $mode "kubernetes-novolume" -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" "/home/runner/k8s-novolume/index.js")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_IMAGE" "value" $runnerImage)) -}}
{{- if not (hasKey $runner "volumeMounts") -}}{{- $_ := set $runner "volumeMounts" list -}}{{- end -}}
{{- end -}}

{{- with .Values.githubServerTLS -}}
{{- if and .runnerMountPath .certificateFrom $runner -}}
{{- $key := .certificateFrom.configMapKeyRef.key -}}
{{- $path := clean (printf "%s/%s" .runnerMountPath $key) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "github-server-tls-cert" "mountPath" $path "subPath" $key)) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "NODE_EXTRA_CA_CERTS" "value" $path)) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "RUNNER_UPDATE_CA_CERTS" "value" "1")) -}}
{{- end -}}
{{- end -}}

{{- $containers := list -}}
{{- if $mode -}}
{{- $containers = append $containers $runner -}}
{{- if $sidecar -}}{{- $containers = append $containers $sidecar -}}{{- end -}}
{{- $containers = concat $containers $others -}}
{{- else -}}
{{- range (default list $spec.containers) -}}
{{- if and (eq .name "runner") $runner -}}
{{- $containers = append $containers $runner -}}
{{- $runner = dict -}}
{{- else if ne .name "runner" -}}
{{- $containers = append $containers . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $volumes := (fromYaml (include "arcflow-runner-set.orderVolumes" (dict "user" $userVolumes "first" $first))).volumes -}}
{{- if $volumes -}}
{{- $_ := set $spec "volumes" $volumes -}}
{{- else if eq $mode "kubernetes-novolume" -}}
{{- $_ := set $spec "volumes" list -}}
{{- else -}}
{{- $_ := unset $spec "volumes" -}}
{{- end -}}
{{- $_ := set $spec "containers" $containers -}}
{{- $_ := set $template "spec" $spec -}}
{{- toYaml $template -}}
{{- end -}}
