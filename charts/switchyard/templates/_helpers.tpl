{{/*
Names, labels and the two command lines. The control-plane and router flags live here, once:
charts/README.md lists them, and the mains in control-plane/ and data-plane/router/ parse them.
*/}}

{{- define "switchyard.name" -}}
{{- default "switchyard" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object-name prefix. Release name is not included on purpose: other clusters and the CLI refer
to these objects by fixed names. */}}
{{- define "switchyard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- include "switchyard.name" . | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.controlPlane.fullname" -}}
{{- printf "%s-control-plane" (include "switchyard.fullname" .) -}}
{{- end -}}

{{- define "switchyard.router.fullname" -}}
{{- printf "%s-router" (include "switchyard.fullname" .) -}}
{{- end -}}

{{- define "switchyard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchyard
{{- end -}}

{{/* Selector labels of one component; call with (dict "root" $ "component" "router"). */}}
{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "switchyard.componentLabels" -}}
{{ include "switchyard.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "switchyard.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The sidecar's redirect init container image, rendered like "switchyard.image". */}}
{{- define "switchyard.redirectImage" -}}
{{- $image := .Values.sidecar.redirectImage -}}
{{- $tag := default .Chart.AppVersion $image.tag -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The effective control-plane mode (controlPlane.mode, or derived; see values.yaml). */}}
{{- define "switchyard.controlPlane.mode" -}}
{{- if .Values.controlPlane.mode -}}
{{- .Values.controlPlane.mode -}}
{{- else if .Values.multiCluster.enabled -}}
{{- if .Values.multiCluster.managementOnly -}}primary{{- else -}}both{{- end -}}
{{- else if .Values.multiClusterMember -}}
member
{{- else -}}
both
{{- end -}}
{{- end -}}

{{/* Does this install orchestrate multi-cluster sessions (child-session Secrets in session namespaces)? */}}
{{- define "switchyard.orchestrates" -}}
{{- $mode := include "switchyard.controlPlane.mode" . -}}
{{- if and .Values.multiCluster.enabled (ne $mode "member") -}}true{{- end -}}
{{- end -}}

{{- define "switchyard.router.serviceAccountName" -}}
{{- include "switchyard.router.fullname" . -}}
{{- end -}}

{{- define "switchyard.controlPlane.serviceAccountName" -}}
{{- include "switchyard.controlPlane.fullname" . -}}
{{- end -}}

{{/* In-cluster RouteDiscovery URL the routers dial; the TLS certificate must cover its host. */}}
{{- define "switchyard.controlPlane.url" -}}
{{- printf "https://%s.%s.svc:%d" (include "switchyard.controlPlane.fullname" .) .Release.Namespace (int .Values.controlPlane.grpcPort) -}}
{{- end -}}

{{/* Base URL of this cluster's routers: router.endpoint, else the in-cluster Service (enough for
single-cluster use inside the cluster; a member reached by a Primary needs router.endpoint). */}}
{{- define "switchyard.router.url" -}}
{{- if .Values.router.endpoint -}}
{{- .Values.router.endpoint -}}
{{- else -}}
{{- printf "wss://%s.%s.svc:%d" (include "switchyard.router.fullname" .) .Release.Namespace (int .Values.router.service.port) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the admission webhook runs: sidecar.injection.enabled on a cluster whose member gives pods agents. */}}
{{- define "switchyard.injection.enabled" -}}
{{- if and .Values.sidecar.injection.enabled (ne (include "switchyard.controlPlane.mode" .) "primary") -}}true{{- end -}}
{{- end -}}

{{- define "switchyard.tlsMountPath" -}}/etc/switchyard/tls{{- end -}}
{{- define "switchyard.branchServerMountPath" -}}/etc/switchyard/branch-servers{{- end -}}
{{- define "switchyard.tokenMountPath" -}}/var/run/secrets/switchyard{{- end -}}

{{/*
The control-plane command line. Flags (all documented in charts/README.md):
  --mode, --namespace, --config-map, --cluster-name, --grpc-listen, --metrics-listen,
  --router-endpoint, --router-service-account, --router-token-audience, --tls-cert, --tls-key,
  --agent-image, --agent-linger-seconds, --injection-listen, --redirect-image, --agent-tls-secret, --agent-tls-server-name, --agent-ca,
  --gateway-ca,
  --allowed-namespaces, --allowed-target-kinds, --allowed-targets, --leader-lease-duration-seconds,
  --leader-renew-deadline-seconds, --leader-retry-period-seconds,
  --health-check-interval-seconds, --log-level,
  --default-cluster, --branch-postgres-url-file, --branch-postgres-advertise,
  --branch-mysql-url-file, --branch-mysql-advertise, --branch-server-aliases,
  --sqs-splitting, --sqs-region, --sqs-endpoint
*/}}
{{- define "switchyard.controlPlane.args" -}}
{{- $cp := .Values.controlPlane -}}
{{- $le := $cp.leaderElection -}}
- dist/control-plane/src/main.js
- --mode={{ include "switchyard.controlPlane.mode" . }}
- --namespace={{ .Release.Namespace }}
- --config-map={{ .Values.multiCluster.configMapName }}
{{- with .Values.multiCluster.clusterName }}
- --cluster-name={{ . }}
{{- end }}
- --grpc-listen=:{{ int $cp.grpcPort }}
- --metrics-listen=:{{ int $cp.metricsPort }}
- --router-endpoint={{ include "switchyard.router.url" . }}
{{- if ne (include "switchyard.controlPlane.mode" .) "primary" }}
- --agent-image={{ include "switchyard.image" . }}
- --agent-linger-seconds={{ int .Values.sidecar.lingerSeconds }}
{{- if include "switchyard.injection.enabled" . }}
- --injection-listen=:{{ int .Values.sidecar.injection.port }}
{{- end }}
- --redirect-image={{ include "switchyard.redirectImage" . }}
{{- with .Values.tls.agentSecretName }}
- --agent-tls-secret={{ . }}
- --agent-tls-server-name={{ $.Values.tls.agentServerName }}
- --agent-ca={{ include "switchyard.tlsMountPath" $ }}/{{ $.Values.tls.caKey }}
{{- end }}
{{- end }}
{{- if and .Values.tls.gatewayCa (ne (include "switchyard.controlPlane.mode" .) "member") }}
- --gateway-ca={{ include "switchyard.tlsMountPath" . }}/{{ .Values.tls.caKey }}
{{- end }}
- --router-service-account={{ .Release.Namespace }}/{{ include "switchyard.router.serviceAccountName" . }}
- --router-token-audience={{ .Values.router.tokenAudience }}
- --tls-cert={{ include "switchyard.tlsMountPath" . }}/tls.crt
- --tls-key={{ include "switchyard.tlsMountPath" . }}/tls.key
{{- with .Values.sessions.allowedNamespaces }}
- --allowed-namespaces={{ join "," . }}
{{- end }}
{{- with .Values.sessions.allowedTargetKinds }}
- --allowed-target-kinds={{ join "," . }}
{{- end }}
{{- with .Values.sessions.allowedTargets }}
- --allowed-targets={{ join "," . }}
{{- end }}
- --leader-lease-duration-seconds={{ int $le.leaseDurationSeconds }}
- --leader-renew-deadline-seconds={{ int $le.renewDeadlineSeconds }}
- --leader-retry-period-seconds={{ int $le.retryPeriodSeconds }}
- --health-check-interval-seconds={{ int $cp.healthCheckIntervalSeconds }}
- --log-level={{ $cp.logLevel }}
{{- $br := .Values.branching }}
{{- if and $br.defaultCluster (ne (include "switchyard.controlPlane.mode" .) "primary") }}
- --default-cluster
{{- end }}
{{- range $engine := list "postgres" "mysql" }}
{{- $srv := get $br $engine }}
{{- if eq $srv.provisioner "pod" }}
- --branch-provisioner-{{ $engine }}=pod
- --branch-pod-image-{{ $engine }}={{ $srv.pod.image }}
{{- end }}
{{- if $srv.urlSecret.name }}
- --branch-{{ $engine }}-url-file={{ include "switchyard.branchServerMountPath" $ }}/{{ $engine }}/url
{{- with $srv.advertise }}
- --branch-{{ $engine }}-advertise={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- with $br.serverAliases }}
- --branch-server-aliases={{ join "," . }}
{{- end }}
{{- with .Values.queues.sqs }}
{{- if .enabled }}
- --sqs-splitting
{{- with .region }}
- --sqs-region={{ . }}
{{- end }}
{{- with .endpoint }}
- --sqs-endpoint={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The router command line; flags as parsed by data-plane/router/src/main.ts. */}}
{{- define "switchyard.router.args" -}}
- dist/data-plane/router/src/main.js
- --listen=:{{ int .Values.router.containerPort }}
- --admin-listen=:{{ int .Values.router.adminPort }}
- --control-plane={{ include "switchyard.controlPlane.url" . }}
- --token-file={{ include "switchyard.tokenMountPath" . }}/token
{{- if .Values.tls.caKey }}
- --control-plane-ca={{ include "switchyard.tlsMountPath" . }}/{{ .Values.tls.caKey }}
{{- end }}
- --tls-cert={{ include "switchyard.tlsMountPath" . }}/tls.crt
- --tls-key={{ include "switchyard.tlsMountPath" . }}/tls.key
- --log-level={{ .Values.router.logLevel }}
{{- end -}}

{{/*
Scheduling of one component's pods; call with (dict "root" $ "component" "router" "values" .Values.router).
"switchyard.affinity" is `affinity` plus, unless it has its own, a podAntiAffinity on the node
from the podAntiAffinity preset; "switchyard.topologySpread" fills each topologySpread entry's
label selector with the component's selector labels.
*/}}
{{- define "switchyard.affinity" -}}
{{- $affinity := deepCopy (.values.affinity | default dict) -}}
{{- if and .values.podAntiAffinity (not (hasKey $affinity "podAntiAffinity")) -}}
{{- $selector := include "switchyard.selectorLabels" (dict "root" .root "component" .component) | fromYaml -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" $selector) -}}
{{- if eq .values.podAntiAffinity "hard" -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) -}}
{{- else -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) -}}
{{- end -}}
{{- end -}}
{{- with $affinity -}}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "switchyard.topologySpread" -}}
{{- $root := .root -}}
{{- $component := .component -}}
{{- with .values.topologySpread -}}
topologySpreadConstraints:
{{- range . }}
  - maxSkew: {{ int (.maxSkew | default 1) }}
    topologyKey: {{ .topologyKey | quote }}
    whenUnsatisfiable: {{ .whenUnsatisfiable | default "ScheduleAnyway" }}
    labelSelector:
      matchLabels:
        {{- include "switchyard.selectorLabels" (dict "root" $root "component" $component) | nindent 8 }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* Pod and container security context shared by both workloads. */}}
{{- define "switchyard.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "switchyard.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
