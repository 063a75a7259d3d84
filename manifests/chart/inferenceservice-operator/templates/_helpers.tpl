{{/*
isvc.labels: the label the kustomize manifests set (app.kubernetes.io/name, the argument) plus
Helm's own; only on objects' metadata, never in selectors or pod templates, so a chart upgrade
does not roll the pods. Call as (list $ "name").
*/}}
{{- define "isvc.labels" -}}
app.kubernetes.io/name: {{ index . 1 }}
{{ include "isvc.helmLabels" (index . 0) }}
{{- end -}}

{{/*
isvc.helmLabels: the chart's own labels alone (the dashboard's ConfigMap has no name label):
Helm's, the app's version (appVersion) and the app it is part of, on every object.
*/}}
{{- define "isvc.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: inferenceservice-operator
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* isvc.image: the operator's image, shared by the metrics adapter and the activator; its tag is the chart's appVersion unless image.tag is set, pinned by image.digest when set. */}}
{{- define "isvc.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end -}}

{{/*
isvc.fromFile: a manifest file of manifests/ (linked under files/) with the release's labels
added and its namespace set; the file stays the one source, comments included.
Call as (list $ "files/x.yaml" "label-name" "namespace-or-empty").
*/}}
{{- define "isvc.fromFile" -}}
{{- $root := index . 0 -}}
{{- $obj := $root.Files.Get (index . 1) | fromYaml -}}
{{- $_ := set $obj.metadata "labels" (merge (include "isvc.labels" (list $root (index . 2)) | fromYaml) ($obj.metadata.labels | default dict)) -}}
{{- if index . 3 }}{{ $_ := set $obj.metadata "namespace" (index . 3) }}{{ end -}}
{{- toYaml $obj -}}
{{- end -}}

{{/*
isvc.clusterScopedRule: whether an RBAC rule is about cluster-scoped resources, which only a
ClusterRole can grant. Namespaces are not among them: a Role in a watched namespace grants get
on that namespace, which is all the operator reads.
*/}}
{{- define "isvc.clusterScopedRule" -}}
{{- $cluster := list "tokenreviews" "subjectaccessreviews" "selfsubjectaccessreviews" "customresourcedefinitions" "nodes" "persistentvolumes" "storageclasses" "priorityclasses" "runtimeclasses" "apiservices" "clusterroles" "clusterrolebindings" "clusterqueues" -}}
{{- range .resources }}{{ if has . $cluster }}true{{ end }}{{ end -}}
{{- end -}}

{{/*
isvc.oneRelease: fails the install of a second release in a cluster. Every part of the chart
hangs on cluster-wide objects of fixed names (the CRD and its one conversion webhook, the
custom.metrics.k8s.io APIServices, the ClusterRoles, the admission policies, whose CEL names the
ServiceAccounts), so two releases would fight over them; the operator's ClusterRole says which
release owns the install (Helm's own annotations on it). helm template and a client-side dry run
look nothing up and render as usual.
*/}}
{{- define "isvc.oneRelease" -}}
{{- with lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" "inferenceservice-operator" -}}
{{- $a := .metadata.annotations | default dict -}}
{{- $name := index $a "meta.helm.sh/release-name" | default "" -}}
{{- $ns := index $a "meta.helm.sh/release-namespace" | default "" -}}
{{- if not $name -}}
{{- fail "the InferenceService operator is already installed in this cluster, not by Helm (ClusterRole inferenceservice-operator has no release; kubectl apply -k manifests/?): one install per cluster, see docs/operations.md#one-release-per-cluster" -}}
{{- else if or (ne $name $.Release.Name) (ne $ns $.Release.Namespace) -}}
{{- fail (printf "the InferenceService operator is already installed in this cluster by release %s in namespace %s: one release per cluster (the CRD, its conversion webhook, the custom metrics APIServices and the ClusterRoles are cluster-wide); upgrade that one (helm upgrade %s -n %s) or uninstall it first, see docs/operations.md#one-release-per-cluster" $name $ns $name $ns) -}}
{{- end -}}
{{- end -}}
{{- end -}}
