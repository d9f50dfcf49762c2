{{/*
The runner pod template of the AutoscalingRunnerSet: the `template` value, plus what the
container mode needs (dind sidecar, container hooks, work volume) and the GitHub server CA
bundle. Whatever the user already set (an env var, a volume or a mount of the same name) wins.
*/}}

{{/* Appends .item to the list .obj[.key] unless an entry with the same name is there. */}}
{{- define "arcflow-runner-set.ensureNamed" -}}
{{- $items := default list (get .obj .key) -}}
{{- $found := false -}}
{{- range $items -}}{{- if eq .name $.item.name -}}{{- $found = true -}}{{- end -}}{{- end -}}
{{- if not $found -}}{{- $_ := set .obj .key (append $items .item) -}}{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.runnerTemplate" -}}
{{- $template := deepCopy (default dict .Values.template) -}}
{{- $spec := deepCopy (default dict $template.spec) -}}
{{- $mode := include "arcflow-runner-set.containerMode" . -}}
{{- $containers := list -}}
{{- $runner := dict -}}
{{- range (default list $spec.containers) -}}
{{- $container := deepCopy . -}}
{{- if eq $container.name "runner" -}}{{- $runner = $container -}}{{- end -}}
{{- $containers = append $containers $container -}}
{{- end -}}
{{- $runnerImage := default "ghcr.io/actions/actions-runner:latest" $runner.image -}}

{{- if not $spec.restartPolicy -}}{{- $_ := set $spec "restartPolicy" "Never" -}}{{- end -}}
{{- if not $spec.serviceAccountName -}}
{{- if include "arcflow-runner-set.isKubeMode" . -}}
{{- $_ := set $spec "serviceAccountName" (include "arcflow-runner-set.kubeModeName" .) -}}
{{- else -}}
{{- $_ := set $spec "serviceAccountName" (include "arcflow-runner-set.noPermissionName" .) -}}
{{- end -}}
{{- end -}}

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
{{- end -}}
{{- range (default list $spec.initContainers) -}}{{- $initContainers = append $initContainers . -}}{{- end -}}
{{- $_ := set $spec "initContainers" $initContainers -}}
{{- if not $nativeSidecar -}}{{- $containers = append $containers $dind -}}{{- end -}}
{{- if $runner -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "DOCKER_HOST" "value" "unix:///var/run/docker.sock")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS" "value" "120")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "work" "mountPath" "/home/runner/_work")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "dind-sock" "mountPath" "/var/run")) -}}
{{- end -}}
{{- range $volume := list "dind-sock" "dind-externals" "work" -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $spec "key" "volumes" "item" (dict "name" $volume "emptyDir" dict)) -}}
{{- end -}}
{{- end -}}

{{- if eq $mode "kubernetes" -}}
{{- if $runner -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" "/home/runner/k8s/index.js")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "work" "mountPath" "/home/runner/_work")) -}}
{{- end -}}
{{- $claim := default dict .Values.containerMode.kubernetesModeWorkVolumeClaim -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $spec "key" "volumes" "item" (dict "name" "work" "ephemeral" (dict "volumeClaimTemplate" (dict "spec" $claim)))) -}}
{{- end -}}

{{- if eq $mode "kubernetes-novolume" -}}
{{- if $runner -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" "/home/runner/k8s-novolume/index.js")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true")) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "ACTIONS_RUNNER_IMAGE" "value" $runnerImage)) -}}
{{- if not (hasKey $runner "volumeMounts") -}}{{- $_ := set $runner "volumeMounts" list -}}{{- end -}}
{{- end -}}
{{- if not (hasKey $spec "volumes") -}}{{- $_ := set $spec "volumes" list -}}{{- end -}}
{{- end -}}

{{- with .Values.githubServerTLS -}}
{{- if and .runnerMountPath .certificateFrom -}}
{{- $ref := required "githubServerTLS.certificateFrom.configMapKeyRef is required with githubServerTLS.runnerMountPath" .certificateFrom.configMapKeyRef -}}
{{- $key := required "githubServerTLS.certificateFrom.configMapKeyRef.key is required" $ref.key -}}
{{- $name := required "githubServerTLS.certificateFrom.configMapKeyRef.name is required" $ref.name -}}
{{- $path := clean (printf "%s/%s" .runnerMountPath $key) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $spec "key" "volumes" "item" (dict "name" "github-server-tls-cert" "configMap" (dict "name" $name "items" (list (dict "key" $key "path" $key))))) -}}
{{- if $runner -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "volumeMounts" "item" (dict "name" "github-server-tls-cert" "mountPath" $path "subPath" $key)) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "NODE_EXTRA_CA_CERTS" "value" $path)) -}}
{{- include "arcflow-runner-set.ensureNamed" (dict "obj" $runner "key" "env" "item" (dict "name" "RUNNER_UPDATE_CA_CERTS" "value" "1")) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- $_ := set $spec "containers" $containers -}}
{{- $_ := set $template "spec" $spec -}}
{{- toYaml $template -}}
{{- end -}}
