{{/*
Names. The scale set name names the AutoscalingRunnerSet ("_" becomes "-"); every other object
the chart renders is named after "<scale set name>-gha-rs", as upstream does, so a switch from
the upstream chart keeps object names.
*/}}
{{- define "arcflow-runner-set.scaleSetName" -}}
{{- $name := default .Release.Name .Values.runnerScaleSetName -}}
{{- if or (eq (len $name) 0) (gt (len $name) 45) -}}
{{- fail (printf "Name must have up to 45 characters (runnerScaleSetName, or the release name, is %q: %d characters)" $name (len $name)) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "arcflow-runner-set.name" -}}
{{- include "arcflow-runner-set.scaleSetName" . | replace "_" "-" -}}
{{- end -}}

{{- define "arcflow-runner-set.namespace" -}}
{{- $namespace := default .Release.Namespace .Values.namespaceOverride -}}
{{- if gt (len $namespace) 63 -}}
{{- fail (printf "Namespace must have up to 63 characters (%q has %d)" $namespace (len $namespace)) -}}
{{- end -}}
{{- $namespace -}}
{{- end -}}

{{- define "arcflow-runner-set.fullname" -}}
{{- printf "%s-gha-rs" (include "arcflow-runner-set.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "arcflow-runner-set.githubSecretName" -}}
{{- if kindIs "string" .Values.githubConfigSecret -}}
{{- .Values.githubConfigSecret -}}
{{- else -}}
{{- printf "%s-github-secret" (include "arcflow-runner-set.fullname" .) | replace "_" "-" -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.managerName" -}}
{{- printf "%s-manager" (include "arcflow-runner-set.fullname" .) -}}
{{- end -}}

{{- define "arcflow-runner-set.kubeModeName" -}}
{{- printf "%s-kube-mode" (include "arcflow-runner-set.fullname" .) -}}
{{- end -}}

{{- define "arcflow-runner-set.noPermissionName" -}}
{{- printf "%s-no-permission" (include "arcflow-runner-set.fullname" .) -}}
{{- end -}}

{{/*
The container mode: dind, kubernetes or kubernetes-novolume; "" for none. Any other type
(`none`, a typo) is no container mode, as the upstream chart treats it; NOTES.txt says so.
*/}}
{{- define "arcflow-runner-set.containerMode" -}}
{{- $mode := include "arcflow-runner-set.containerModeType" . -}}
{{- if has $mode (list "dind" "kubernetes" "kubernetes-novolume") -}}{{- $mode -}}{{- end -}}
{{- end -}}

{{/* containerMode.type as written ("" when unset). */}}
{{- define "arcflow-runner-set.containerModeType" -}}
{{- with .Values.containerMode -}}{{- default "" .type | toString -}}{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.isKubeMode" -}}
{{- $mode := include "arcflow-runner-set.containerMode" . -}}
{{- if or (eq $mode "kubernetes") (eq $mode "kubernetes-novolume") -}}true{{- end -}}
{{- end -}}

{{/* The runner template names its own service account: the chart then creates none. */}}
{{- define "arcflow-runner-set.templateServiceAccount" -}}
{{- $spec := dict -}}
{{- with .Values.template -}}{{- $spec = default dict .spec -}}{{- end -}}
{{- default "" $spec.serviceAccountName -}}
{{- end -}}

{{- define "arcflow-runner-set.needsKubeModeObjects" -}}
{{- if and (include "arcflow-runner-set.isKubeMode" .) (not (include "arcflow-runner-set.templateServiceAccount" .)) -}}true
{{- else -}}{{- include "arcflow-runner-set.variantsNeed" (dict "root" . "kube" true) -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.needsNoPermissionServiceAccount" -}}
{{- if and (not (include "arcflow-runner-set.isKubeMode" .)) (not (include "arcflow-runner-set.templateServiceAccount" .)) -}}true
{{- else -}}{{- include "arcflow-runner-set.variantsNeed" (dict "root" . "kube" false) -}}
{{- end -}}
{{- end -}}

{{/*
Container modes of runnerVariants (ADR 0063). A variant's containerMode (chart-only, never
rendered into the ARS) wins over the top-level one; with neither, the variant's template is
rendered as written, as before.
variantMode (dict "root" . "variant" $v): the variant's effective mode, "" for none.
*/}}
{{- define "arcflow-runner-set.variantMode" -}}
{{- $cm := .root.Values.containerMode -}}
{{- if hasKey .variant "containerMode" -}}{{- $cm = .variant.containerMode -}}{{- end -}}
{{- $type := "" -}}
{{- with $cm -}}{{- $type = default "" .type | toString -}}{{- end -}}
{{- if has $type (list "dind" "kubernetes" "kubernetes-novolume") -}}{{- $type -}}{{- end -}}
{{- end -}}

{{/* Whether the chart renders this variant's template through the container mode. */}}
{{- define "arcflow-runner-set.variantRendered" -}}
{{- if or (hasKey .variant "containerMode") (and .variant.template (include "arcflow-runner-set.variantMode" .)) -}}true{{- end -}}
{{- end -}}

{{/* "true" when a rendered variant needs the kube-mode objects (kube: true) or the
no-permission service account (kube: false) and its template names no service account. */}}
{{- define "arcflow-runner-set.variantsNeed" -}}
{{- $root := .root -}}
{{- $kube := .kube -}}
{{- $need := false -}}
{{- range $variant := default list $root.Values.runnerVariants -}}
{{- $args := dict "root" $root "variant" $variant -}}
{{- if include "arcflow-runner-set.variantRendered" $args -}}
{{- $mode := include "arcflow-runner-set.variantMode" $args -}}
{{- $isKube := or (eq $mode "kubernetes") (eq $mode "kubernetes-novolume") -}}
{{- $template := default (default dict $root.Values.template) $variant.template -}}
{{- $account := (default dict $template.spec).serviceAccountName -}}
{{- if and (eq $isKube $kube) (not $account) -}}{{- $need = true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if $need -}}true{{- end -}}
{{- end -}}

{{/*
Labels. The reserved keys come last so the global `labels` value cannot change them, and no
actions.github.com/* key is taken from it.
*/}}
{{- define "arcflow-runner-set.reservedLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "arcflow-runner-set.name" . }}
app.kubernetes.io/instance: {{ include "arcflow-runner-set.name" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gha-rs
actions.github.com/scale-set-name: {{ include "arcflow-runner-set.name" . }}
actions.github.com/scale-set-namespace: {{ include "arcflow-runner-set.namespace" . }}
{{- end -}}

{{/* labels for one object: (dict "root" $ "meta" <resourceMeta entry or nil> "component" "") */}}
{{- define "arcflow-runner-set.labels" -}}
{{- $root := .root -}}
{{- $labels := dict -}}
{{- range $key, $value := (default dict $root.Values.labels) -}}
{{- if not (hasPrefix "actions.github.com/" $key) -}}{{- $_ := set $labels $key $value -}}{{- end -}}
{{- end -}}
{{- with .meta -}}
{{- range $key, $value := (default dict .labels) -}}
{{- if not (hasPrefix "actions.github.com/" $key) -}}{{- $_ := set $labels $key $value -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $reserved := fromYaml (include "arcflow-runner-set.reservedLabels" $root) -}}
{{- range $key, $value := $reserved -}}{{- $_ := set $labels $key $value -}}{{- end -}}
{{- if .component -}}{{- $_ := set $labels "app.kubernetes.io/component" .component -}}{{- end -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* annotations for one object: (dict "root" $ "meta" <resourceMeta entry or nil>) */}}
{{- define "arcflow-runner-set.annotations" -}}
{{- $annotations := dict -}}
{{- range $source := list (default dict .root.Values.annotations) (default dict (.meta | default dict).annotations) -}}
{{- range $key, $value := $source -}}
{{- if not (or (hasPrefix "actions.github.com/cleanup-" $key) (eq $key "actions.github.com/values-hash")) -}}
{{- $_ := set $annotations $key $value -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $annotations -}}{{- toYaml $annotations -}}{{- end -}}
{{- end -}}

{{/* A resourceMeta entry by name, or nil. */}}
{{- define "arcflow-runner-set.resourceMeta" -}}
{{- $meta := dict -}}
{{- with .root.Values.resourceMeta -}}{{- $meta = default dict (get . $.name) -}}{{- end -}}
{{- toYaml $meta -}}
{{- end -}}

{{/* {labels, annotations} of a resourceMeta entry, for the ARS spec's *Metadata fields. */}}
{{- define "arcflow-runner-set.specMetadata" -}}
{{- $meta := fromYaml (include "arcflow-runner-set.resourceMeta" .) -}}
{{- $out := dict -}}
{{- if $meta.labels -}}{{- $_ := set $out "labels" $meta.labels -}}{{- end -}}
{{- if $meta.annotations -}}{{- $_ := set $out "annotations" $meta.annotations -}}{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- define "arcflow-runner-set.isNumber" -}}
{{- if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) (kindIs "int32" .) -}}true{{- end -}}
{{- end -}}

{{/*
The controller (arcflow reconciler) service account, from controllerServiceAccount or, failing
that, from the reconciler Deployment found in the cluster by its labels. Output: "name/namespace".
*/}}
{{- define "arcflow-runner-set.controllerServiceAccount" -}}
{{- $explicit := default dict .Values.controllerServiceAccount -}}
{{- if and $explicit.name $explicit.namespace -}}
{{- printf "%s/%s" $explicit.name $explicit.namespace -}}
{{- else -}}
{{- $namespace := include "arcflow-runner-set.namespace" . -}}
{{- $multi := list -}}
{{- $single := list -}}
{{- $singleHere := list -}}
{{- range $deployment := (lookup "apps/v1" "Deployment" "" "").items -}}
{{- $labels := default dict $deployment.metadata.labels -}}
{{- if eq (get $labels "app.kubernetes.io/part-of") "gha-rs-controller" -}}
{{- $watched := get $labels "actions.github.com/controller-watch-single-namespace" -}}
{{- if $watched -}}
{{- $single = append $single $deployment -}}
{{- if eq $watched $namespace -}}{{- $singleHere = append $singleHere $deployment -}}{{- end -}}
{{- else -}}
{{- $multi = append $multi $deployment -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (eq (len $multi) 0) (eq (len $single) 0) -}}
{{- fail "No gha-rs-controller deployment found using label (app.kubernetes.io/part-of=gha-rs-controller). Install the arcflow-reconciler chart first, or set controllerServiceAccount.name and controllerServiceAccount.namespace." -}}
{{- end -}}
{{- if and (gt (len $multi) 0) (gt (len $single) 0) -}}
{{- fail "Found both gha-rs-controller installed with flags.watchSingleNamespace set and unset in cluster, this is not supported. Set controllerServiceAccount.name and controllerServiceAccount.namespace." -}}
{{- end -}}
{{- if gt (len $multi) 1 -}}
{{- fail "More than one gha-rs-controller deployment found using label (app.kubernetes.io/part-of=gha-rs-controller). Set controllerServiceAccount.name and controllerServiceAccount.namespace." -}}
{{- end -}}
{{- $found := dict -}}
{{- if eq (len $multi) 1 -}}
{{- $found = first $multi -}}
{{- else -}}
{{- if eq (len $singleHere) 0 -}}
{{- fail (printf "No gha-rs-controller deployment that watch this namespace found using label (actions.github.com/controller-watch-single-namespace=%s). Set controllerServiceAccount.name and controllerServiceAccount.namespace." $namespace) -}}
{{- end -}}
{{- $found = first $singleHere -}}
{{- end -}}
{{- $labels := default dict $found.metadata.labels -}}
{{- $saName := get $labels "actions.github.com/controller-service-account-name" -}}
{{- $saNamespace := get $labels "actions.github.com/controller-service-account-namespace" -}}
{{- if not $saName -}}
{{- fail (printf "No service account name found for the gha-rs-controller deployment %s/%s (label actions.github.com/controller-service-account-name)" $found.metadata.namespace $found.metadata.name) -}}
{{- end -}}
{{- if not $saNamespace -}}
{{- fail (printf "No service account namespace found for the gha-rs-controller deployment %s/%s (label actions.github.com/controller-service-account-namespace)" $found.metadata.namespace $found.metadata.name) -}}
{{- end -}}
{{- printf "%s/%s" $saName $saNamespace -}}
{{- end -}}
{{- end -}}

{{/*
Validations that do not belong to one object, run once from the ARS template. Messages keep the
upstream chart's wording so searches for an upstream error find the same cause here.
*/}}
{{- define "arcflow-runner-set.validateLabels" -}}
{{- $prefix := .prefix -}}
{{- range $label := .labels -}}
{{- if not $label -}}
{{- fail (printf "%sscaleSetLabels contains an empty string, each label must be a non-empty string of less than 256 characters" $prefix) -}}
{{- end -}}
{{- if ge (len (toString $label)) 256 -}}
{{- fail (printf "%sscaleSetLabels contains a label that is 256 characters or more, each label must be a non-empty string of less than 256 characters" $prefix) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.validateRunnerCounts" -}}
{{- $max := .Values.maxRunners -}}
{{- $min := .Values.minRunners -}}
{{- if and (include "arcflow-runner-set.isNumber" $max) (lt (int $max) 0) -}}
{{- fail "maxRunners has to be greater or equal to 0" -}}
{{- end -}}
{{- if and (include "arcflow-runner-set.isNumber" $min) (lt (int $min) 0) -}}
{{- fail "minRunners has to be greater or equal to 0" -}}
{{- end -}}
{{- if and (include "arcflow-runner-set.isNumber" $max) (include "arcflow-runner-set.isNumber" $min) (gt (int $min) (int $max)) -}}
{{- fail "maxRunners has to be greater or equal to minRunners" -}}
{{- end -}}
{{- end -}}

{{/*
runnerVariants: a name on every entry, unique, a DNS label, and an EphemeralRunnerSet name
"<AutoscalingRunnerSet name>-<variant>" of at most 63 characters. The length is computed from
the name the AutoscalingRunnerSet really gets (runnerScaleSetName, else the release name), not
from the release name alone. Counts are checked on the effective values (a variant's own
minRunners/maxRunners, else the top-level ones), when the variant sets one of them.
*/}}
{{- define "arcflow-runner-set.validateRunnerVariants" -}}
{{- $arsName := include "arcflow-runner-set.name" . -}}
{{- $seen := dict -}}
{{- $topMin := .Values.minRunners -}}
{{- $topMax := .Values.maxRunners -}}
{{- range $index, $variant := (default list .Values.runnerVariants) -}}
{{- if not (kindIs "map" $variant) -}}
{{- fail (printf "runnerVariants[%d] must be a map with at least a name" $index) -}}
{{- end -}}
{{- $name := required "each runnerVariants entry needs a name" $variant.name | toString -}}
{{- if hasKey $seen $name -}}
{{- fail (printf "runnerVariants name %q is duplicated; names must be unique" $name) -}}
{{- end -}}
{{- $_ := set $seen $name true -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "runnerVariants name %q must be a DNS label (lower case letters, digits and dashes)" $name) -}}
{{- end -}}
{{- $ersName := printf "%s-%s" $arsName $name -}}
{{- if gt (len $ersName) 63 -}}
{{- fail (printf "runnerVariants name %q makes the EphemeralRunnerSet name %q longer than 63 characters; use a shorter variant name" $name $ersName) -}}
{{- end -}}
{{- if hasKey $variant "runnerScaleSetLabels" -}}
{{- include "arcflow-runner-set.validateLabels" (dict "labels" (default list $variant.runnerScaleSetLabels) "prefix" (printf "runnerVariants name %q: " $name)) -}}
{{- end -}}
{{- $ownMin := include "arcflow-runner-set.isNumber" $variant.minRunners -}}
{{- $ownMax := include "arcflow-runner-set.isNumber" $variant.maxRunners -}}
{{- if and $ownMax (lt (int $variant.maxRunners) 0) -}}
{{- fail (printf "runnerVariants name %q: maxRunners has to be greater or equal to 0" $name) -}}
{{- end -}}
{{- if and $ownMin (lt (int $variant.minRunners) 0) -}}
{{- fail (printf "runnerVariants name %q: minRunners has to be greater or equal to 0" $name) -}}
{{- end -}}
{{- if or $ownMin $ownMax -}}
{{- $min := 0 -}}
{{- if $ownMin -}}{{- $min = int $variant.minRunners -}}{{- else if include "arcflow-runner-set.isNumber" $topMin -}}{{- $min = int $topMin -}}{{- end -}}
{{- $max := 2147483647 -}}
{{- if $ownMax -}}{{- $max = int $variant.maxRunners -}}{{- else if include "arcflow-runner-set.isNumber" $topMax -}}{{- $max = int $topMax -}}{{- end -}}
{{- if gt $min $max -}}
{{- fail (printf "runnerVariants name %q: maxRunners has to be greater or equal to minRunners (minRunners %d, maxRunners %d)" $name $min $max) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.validateGithubSecret" -}}
{{- $secret := .Values.githubConfigSecret -}}
{{- if kindIs "string" $secret -}}
{{- if not $secret -}}
{{- fail "Values.githubConfigSecret is required for setting auth with GitHub server." -}}
{{- end -}}
{{- else if kindIs "map" $secret -}}
{{- if and (not $secret.github_token) (not $secret.github_app_id) -}}
{{- fail "A valid .Values.githubConfigSecret is required for setting auth with GitHub server, provide .Values.githubConfigSecret.github_token or .Values.githubConfigSecret.github_app_id." -}}
{{- end -}}
{{- if and $secret.github_app_id (or (not $secret.github_app_installation_id) (not $secret.github_app_private_key)) -}}
{{- fail "A valid .Values.githubConfigSecret is required for setting auth with GitHub server, provide .Values.githubConfigSecret.github_app_installation_id and .Values.githubConfigSecret.github_app_private_key." -}}
{{- end -}}
{{- else -}}
{{- fail "Values.githubConfigSecret is required for setting auth with GitHub server." -}}
{{- end -}}
{{- end -}}

{{- define "arcflow-runner-set.validateKeyVault" -}}
{{- with .Values.keyVault -}}
{{- if and .type (ne .type "azure_key_vault") -}}
{{- fail (printf "Unsupported keyVault type: %s" .type) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Every value check, in one order whichever template helm renders first: each template starts
with it, so the first failure reported is the same for every template.
*/}}
{{- define "arcflow-runner-set.validate" -}}
{{- $_ := required ".Values.githubConfigUrl is required" (trimSuffix "/" (toString (default "" .Values.githubConfigUrl))) -}}
{{- $_ := include "arcflow-runner-set.scaleSetName" . -}}
{{- $_ := include "arcflow-runner-set.namespace" . -}}
{{- include "arcflow-runner-set.validateGithubSecret" . -}}
{{- include "arcflow-runner-set.validateKeyVault" . -}}
{{- include "arcflow-runner-set.validateLabels" (dict "labels" (default list .Values.scaleSetLabels) "prefix" "") -}}
{{- include "arcflow-runner-set.validateRunnerCounts" . -}}
{{- include "arcflow-runner-set.validateRunnerVariants" . -}}
{{- end -}}
