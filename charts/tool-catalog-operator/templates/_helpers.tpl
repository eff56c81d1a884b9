{{/* The chart's name. */}}
{{- define "tco.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: the release name, and the chart's
unless the release name holds it already. */}}
{{- define "tco.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := include "tco.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every resource; the component is passed in. */}}
{{- define "tco.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{ include "tco.selector" . }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of a component. */}}
{{- define "tco.selector" -}}
app.kubernetes.io/name: {{ include "tco.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The image of both binaries. */}}
{{- define "tco.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if hasPrefix "sha256:" $tag }}
{{- printf "%s@%s" .Values.image.repository $tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The namespaces granted in the namespaced install. */}}
{{- define "tco.namespaced" -}}
{{- if eq .Values.rbac.scope "namespaced" }}
{{- if not .Values.watchNamespaces }}
{{- fail "rbac.scope=namespaced needs watchNamespaces: the namespaces the manager and the gateway may act in" }}
{{- end }}
{{- true }}
{{- end }}
{{- end }}

{{/* The security context of every container, as in config/. */}}
{{- define "tco.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* The security context of every pod. */}}
{{- define "tco.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Flags shared by the manager and the gateway. */}}
{{- define "tco.sharedArgs" -}}
{{- with .Values.watchNamespaces }}
- --watch-namespaces={{ join "," . }}
{{- end }}
{{- with .Values.egressAllow }}
- --egress-allow={{ join "," . }}
{{- end }}
{{- with .Values.clusterDomain }}
- --cluster-domain={{ . }}
{{- end }}
{{- with .Values.podNetworks }}
- --pod-networks={{ join "," . }}
{{- end }}
{{- end }}

{{/* The manager's rules: config/rbac/role.yaml, generated from the
controllers' RBAC markers. */}}
{{- define "tco.managerRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
- apiGroups: [""]
  resources: [secrets, services]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [referencegrants]
  verbs: [get, list, watch]
- apiGroups: [kagent.dev]
  resources: [remotemcpservers]
  verbs: [get, list, watch]
- apiGroups: [mcp.x-k8s.io]
  resources: [mcpservers]
  verbs: [get, list, watch]
- apiGroups: [toolcatalog.dev]
  resources: [toolcatalogs, toolsourcetemplates]
  verbs: [get, list, patch, update, watch]
- apiGroups: [toolcatalog.dev]
  resources: [toolcatalogs/finalizers, toolsources/finalizers, toolsourcetemplates/finalizers]
  verbs: [update]
- apiGroups: [toolcatalog.dev]
  resources: [toolcatalogs/status, tooldefinitions/status, toolsources/status, toolsourcetemplates/status]
  verbs: [get, patch, update]
- apiGroups: [toolcatalog.dev]
  resources: [tooldefinitions]
  verbs: [create, delete, get, list, patch, watch]
- apiGroups: [toolcatalog.dev]
  resources: [toolsourceapprovals]
  verbs: [delete, get, list, watch]
- apiGroups: [toolcatalog.dev]
  resources: [toolsources]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [toolhive.stacklok.dev]
  resources: [mcpremoteproxies, mcpservers, virtualmcpservers]
  verbs: [get, list, watch]
{{- end }}

{{/* The gateway reads catalogs and sources (watched) and the Secrets
they name, only those labelled toolcatalog.dev/secret=true, and follows
sources' serverRef (config/gateway/rbac.yaml). It writes nothing. */}}
{{- define "tco.gatewayRules" -}}
- apiGroups: [toolcatalog.dev]
  resources: [toolcatalogs, toolsources]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets, services, pods]
  verbs: [get]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list]
- apiGroups: [gateway.networking.k8s.io]
  resources: [referencegrants]
  verbs: [list]
- apiGroups: [kagent.dev]
  resources: [remotemcpservers]
  verbs: [get]
- apiGroups: [mcp.x-k8s.io]
  resources: [mcpservers]
  verbs: [get]
- apiGroups: [toolhive.stacklok.dev]
  resources: [mcpremoteproxies, mcpservers, virtualmcpservers]
  verbs: [get]
{{- end }}
