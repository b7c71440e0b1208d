{{/*
Install-time enforcement of DESIGN §1 and of the rules between values. values.schema.json checks
types; this checks meaning. Each rule mirrors control-plane/src/config/cluster-config.ts (same
field paths under "multiCluster.", same problem and fix text) so an operator sees the same error
from `helm install` as from a control plane that started with a hand-edited ConfigMap. Every
problem is collected and reported at once, like the control plane does.
*/}}
{{- define "switchyard.validate" -}}
{{- $errs := list -}}
{{- $label := "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" -}}
{{- $labelFix := "use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit" -}}
{{- $authTypes := list "bearerToken" "eks" "mtls" -}}
{{- $mc := .Values.multiCluster -}}
{{- $mode := include "switchyard.controlPlane.mode" . -}}

{{- /* ---- multiCluster (DESIGN §1) ---- */ -}}
{{- $clusterName := "" -}}
{{- if not $mc.clusterName -}}
  {{- if $mc.enabled -}}
    {{- $errs = append $errs "multiCluster.clusterName: is required. Fix: set clusterName to this (the Primary) cluster's name, e.g. primary" -}}
  {{- end -}}
{{- else if not (regexMatch $label $mc.clusterName) -}}
  {{- $errs = append $errs (printf "multiCluster.clusterName: %q is not an RFC 1123 label. Fix: %s" $mc.clusterName $labelFix) -}}
{{- else -}}
  {{- $clusterName = $mc.clusterName -}}
{{- end -}}

{{- if $mc.enabled -}}
{{- $clusters := $mc.clusters | default dict -}}
{{- $marked := list -}}
{{- /* Each key's cluster name (control-plane/src/config/cluster-name.ts): the key, or for an eks
cluster keyed by its EKS name, that name lowercased, '_' as '-', cut to 63, trailing '-' dropped. */ -}}
{{- $nameOf := dict -}}
{{- $keysOf := dict -}}
{{- range $key := keys $clusters | sortAlpha -}}
  {{- $c := get $clusters $key | default dict -}}
  {{- if regexMatch $label $key -}}
    {{- $_ := set $nameOf $key $key -}}
  {{- else if and (regexMatch "^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$" $key) (eq ($c.authType | toString) "eks") -}}
    {{- $_ := set $nameOf $key (regexReplaceAll "-+$" ($key | lower | replace "_" "-" | trunc 63) "") -}}
  {{- end -}}
  {{- with get $nameOf $key -}}
    {{- $_ := set $keysOf . (append (get $keysOf . | default list) $key) -}}
  {{- end -}}
{{- end -}}
{{- range $key := keys $clusters | sortAlpha -}}
  {{- $group := get $keysOf (get $nameOf $key | default "") | default list -}}
  {{- if and (gt (len $group) 1) (eq (index $group 0) $key) -}}
    {{- $quoted := list -}}
    {{- range $group }}{{ $quoted = append $quoted (printf "%q" .) }}{{ end -}}
    {{- $errs = append $errs (printf "multiCluster.clusters: %s become the same cluster name %q. Fix: rename all but one: object names and labels use an EKS cluster name lowercased, with '_' as '-'" (join ", " $quoted) (get $nameOf $key)) -}}
  {{- end -}}
{{- end -}}
{{- range $key := keys $clusters | sortAlpha -}}
  {{- $c := get $clusters $key | default dict -}}
  {{- $at := printf "multiCluster.clusters.%s" $key -}}
  {{- $name := get $nameOf $key | default "" -}}
  {{- if not $name -}}
    {{- $errs = append $errs (printf "%s: %q is not an RFC 1123 label. Fix: rename the key: lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (only an eks cluster may keep its EKS name)" $at $key) -}}
  {{- else if gt (len (get $keysOf $name)) 1 -}}
  {{- else if and (eq $name $clusterName) (eq $name $key) -}}
    {{- $errs = append $errs (printf "%s: names the Primary itself. Fix: remove it from clusters; the Primary is reached in-cluster, and defaultCluster: %s makes it the Default" $at $name) -}}
  {{- else if eq $name $clusterName -}}
    {{- $errs = append $errs (printf "%s: becomes the cluster name %q, the Primary's own. Fix: remove it from clusters; the Primary is reached in-cluster, and defaultCluster: %s makes it the Default" $at $name $name) -}}
  {{- else -}}
    {{- $authType := $c.authType | default "" -}}
    {{- if not $authType -}}
      {{- $errs = append $errs (printf "%s.authType: is required (there is no default). Fix: set authType to one of %s" $at (join ", " $authTypes)) -}}
    {{- else if not (has $authType $authTypes) -}}
      {{- $errs = append $errs (printf "%s.authType: %q is not supported. Fix: set authType to one of %s (case matters)" $at $authType (join ", " $authTypes)) -}}
      {{- $authType = "" -}}
    {{- end -}}

    {{- $server := $c.server | default "" -}}
    {{- if not $server -}}
      {{- $errs = append $errs (printf "%s.server: is required. Fix: set server to the API server URL, e.g. https://api.east.example.com:6443" $at) -}}
    {{- else if not (regexMatch "^https://[^\\s/?#]+(/[^\\s]*)?$" $server) -}}
      {{- $errs = append $errs (printf "%s.server: %q is not an https URL. Fix: set server to https://<host>[:port]" $at $server) -}}
      {{- $server = "" -}}
    {{- end -}}

    {{- if not $c.caData -}}
      {{- if eq $authType "eks" -}}
        {{- $errs = append $errs (printf "%s.caData: is required for authType eks. Fix: set caData to the base64 CA bundle (aws eks describe-cluster --query cluster.certificateAuthority.data)" $at) -}}
      {{- end -}}
    {{- else if not (contains "-----BEGIN CERTIFICATE-----" (b64dec $c.caData)) -}}
      {{- $errs = append $errs (printf "%s.caData: is not a base64-encoded PEM certificate. Fix: set caData to base64 of the CA's PEM (as in a kubeconfig's certificate-authority-data)" $at) -}}
    {{- end -}}

    {{- $region := $c.region | default "" -}}
    {{- if and $region (not (regexMatch "^[a-z]{2}(-gov)?-[a-z]+-[0-9]$" $region)) -}}
      {{- $errs = append $errs (printf "%s.region: %q is not an AWS region. Fix: set region like eu-north-1" $at $region) -}}
      {{- $region = "" -}}
    {{- end -}}
    {{- if and (eq $authType "eks") (not $region) $server (not (regexMatch "^https://[a-z0-9]+\\.[a-z0-9]+\\.[a-z]{2}(-gov)?-[a-z]+-[0-9]\\.eks\\.amazonaws\\.com(:[0-9]+)?(/.*)?$" $server)) -}}
      {{- $errs = append $errs (printf "%s.region: is required for authType eks when server is not an *.eks.amazonaws.com endpoint. Fix: set region to the cluster's AWS region (STS is called in that region)" $at) -}}
    {{- end -}}

    {{- if and $c.namespace (not (regexMatch $label $c.namespace)) -}}
      {{- $errs = append $errs (printf "%s.namespace: %q is not a namespace name. Fix: use an RFC 1123 label" $at $c.namespace) -}}
    {{- end -}}

    {{- /* Credentials carried in values become Secret switchyard-cluster-<name> (credential-secret.ts). */ -}}
    {{- if $c.token -}}
      {{- if and $authType (ne $authType "bearerToken") -}}
        {{- $errs = append $errs (printf "%s.token: is only used with authType bearerToken (this cluster is %s). Fix: remove token, or set authType: bearerToken" $at $authType) -}}
      {{- else if ne (len (splitList "." (trim $c.token))) 3 -}}
        {{- $errs = append $errs (printf "%s.token: is not a JWT. Fix: store a ServiceAccount token (kubectl create token switchyard-primary -n <ns> --duration=24h)" $at) -}}
      {{- end -}}
    {{- end -}}
    {{- if $c.tls -}}
      {{- if and $authType (ne $authType "mtls") -}}
        {{- $errs = append $errs (printf "%s.tls: is only used with authType mtls (this cluster is %s). Fix: remove tls, or set authType: mtls" $at $authType) -}}
      {{- else if not (and $c.tls.cert $c.tls.key) -}}
        {{- $errs = append $errs (printf "%s.tls: needs both cert and key. Fix: set tls.cert and tls.key (PEM), or neither and create Secret switchyard-cluster-%s yourself" $at $name) -}}
      {{- else -}}
        {{- if not (contains "-----BEGIN CERTIFICATE-----" $c.tls.cert) -}}
          {{- $errs = append $errs (printf "%s.tls.cert: is not a PEM certificate. Fix: store the PEM client certificate" $at) -}}
        {{- end -}}
        {{- if not (regexMatch "-----BEGIN ([A-Z]+ )?PRIVATE KEY-----" $c.tls.key) -}}
          {{- $errs = append $errs (printf "%s.tls.key: is not a PEM private key. Fix: store the PEM private key" $at) -}}
        {{- end -}}
      {{- end -}}
    {{- end -}}
    {{- /* Like the control plane, only a cluster with a valid authType counts as marked. */ -}}
    {{- if and $c.isDefault $authType -}}{{- $marked = append $marked $key -}}{{- end -}}
  {{- end -}}
{{- end -}}

{{- /* The Default cluster: defaultCluster, or the one cluster marked isDefault. */ -}}
{{- if gt (len $marked) 1 -}}
  {{- $errs = append $errs (printf "multiCluster.clusters.%s.isDefault: more than one cluster is marked isDefault (%s). Fix: mark exactly one cluster isDefault, or set defaultCluster instead" (index $marked 1) (join ", " $marked)) -}}
{{- end -}}
{{- $written := $mc.defaultCluster | default "" -}}
{{- $default := $written -}}
{{- if $written -}}
  {{- $default = get $nameOf $written | default $written -}}
  {{- if and (eq (len $marked) 1) (ne (get $nameOf (index $marked 0)) $default) -}}
    {{- $errs = append $errs (printf "multiCluster.clusters.%s.isDefault: contradicts defaultCluster: %s. Fix: remove isDefault or make defaultCluster name the same cluster" (index $marked 0) $written) -}}
  {{- end -}}
{{- else if eq (len $marked) 1 -}}
  {{- $default = get $nameOf (index $marked 0) -}}
{{- end -}}
{{- $configured := keys $clusters | sortAlpha -}}
{{- $known := concat $configured (values $nameOf) -}}
{{- $candidates := $configured -}}
{{- if and $clusterName (not $mc.managementOnly) -}}{{- $candidates = prepend $configured $clusterName -}}{{- end -}}
{{- if not $default -}}
  {{- if $mc.managementOnly -}}
    {{- $errs = append $errs "multiCluster.defaultCluster: is required when multi-cluster is enabled. Fix: set defaultCluster to one of the remote clusters" -}}
  {{- else -}}
    {{- $errs = append $errs (printf "multiCluster.defaultCluster: is required when multi-cluster is enabled. Fix: set defaultCluster to one of: %s" (join ", " $candidates)) -}}
  {{- end -}}
{{- else if and (eq $default $clusterName) $clusterName -}}
  {{- if $mc.managementOnly -}}
    {{- $errs = append $errs (printf "multiCluster.defaultCluster: names the Primary %q, which is managementOnly and hosts no sessions. Fix: set defaultCluster to one of the remote clusters (%s), or set managementOnly: false" $clusterName (join ", " $configured | default "none configured")) -}}
  {{- end -}}
{{- else if not (has $default $known) -}}
  {{- $errs = append $errs (printf "multiCluster.defaultCluster: %q is not a configured cluster. Fix: set defaultCluster to one of: %s" $default (join ", " $candidates)) -}}
{{- end -}}
{{- if and $mc.managementOnly (eq (len $configured) 0) -}}
  {{- $errs = append $errs "multiCluster.clusters: is empty but managementOnly is true. Fix: add at least one workload cluster" -}}
{{- end -}}
{{- if eq $mode "member" -}}
  {{- $errs = append $errs "controlPlane.mode: member cannot orchestrate (multiCluster.enabled is true). Fix: set controlPlane.mode to primary or both (or leave it empty), or set multiCluster.enabled=false" -}}
{{- end -}}
{{- if and (eq $mode "primary") (not $mc.managementOnly) -}}
  {{- $errs = append $errs "controlPlane.mode: primary hosts no child session, but multiCluster.managementOnly is false. Fix: set controlPlane.mode to both (or leave it empty), or set multiCluster.managementOnly=true" -}}
{{- end -}}
{{- end -}}

{{- /* ---- member side (DESIGN §6) ---- */ -}}
{{- if and .Values.multiClusterMemberIamGroup (not .Values.multiClusterMember) -}}
  {{- $errs = append $errs "multiClusterMemberIamGroup: is set but multiClusterMember is false. Fix: set multiClusterMember=true, or remove multiClusterMemberIamGroup" -}}
{{- end -}}
{{- if and .Values.multiClusterMember (eq $mode "primary") -}}
  {{- $errs = append $errs "controlPlane.mode: primary does not serve child sessions, but multiClusterMember is true. Fix: set controlPlane.mode to member or both (or leave it empty)" -}}
{{- end -}}

{{- /* ---- control plane ---- */ -}}
{{- $le := .Values.controlPlane.leaderElection -}}
{{- if not (and (lt (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds)) (lt (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds))) -}}
  {{- $errs = append $errs (printf "controlPlane.leaderElection: need retryPeriodSeconds (%d) < renewDeadlineSeconds (%d) < leaseDurationSeconds (%d). Fix: e.g. 2 < 10 < 15" (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds)) -}}
{{- end -}}
{{- if eq (int .Values.controlPlane.grpcPort) (int .Values.controlPlane.metricsPort) -}}
  {{- $errs = append $errs "controlPlane.metricsPort: equals controlPlane.grpcPort. Fix: give them different ports" -}}
{{- end -}}

{{- /* ---- resources: a request above its limit is refused by the API server ---- */ -}}
{{- range $component := list "controlPlane" "router" -}}
  {{- $res := (index $.Values $component).resources | default dict -}}
  {{- $requests := $res.requests | default dict -}}
  {{- $limits := $res.limits | default dict -}}
  {{- range $name := keys $requests | sortAlpha -}}
    {{- if hasKey $limits $name -}}
      {{- $req := include "switchyard.quantityValue" (get $requests $name) | float64 -}}
      {{- $lim := include "switchyard.quantityValue" (get $limits $name) | float64 -}}
      {{- if gt $req $lim -}}
        {{- $errs = append $errs (printf "%s.resources.requests.%s: %v is above %s.resources.limits.%s (%v). Fix: set the request at most the limit, or raise the limit" $component $name (get $requests $name) $component $name (get $limits $name)) -}}
      {{- end -}}
    {{- end -}}
  {{- end -}}
{{- end -}}

{{- /* ---- router ---- */ -}}
{{- $as := .Values.router.autoscaling -}}
{{- if and $as.enabled (gt (int $as.minReplicas) (int $as.maxReplicas)) -}}
  {{- $errs = append $errs (printf "router.autoscaling.minReplicas: %d is above maxReplicas %d. Fix: set minReplicas <= maxReplicas" (int $as.minReplicas) (int $as.maxReplicas)) -}}
{{- end -}}
{{- $svc := .Values.router.service -}}
{{- if and $svc.nodePort (eq $svc.type "ClusterIP") -}}
  {{- $errs = append $errs (printf "router.service.nodePort: %d is set but router.service.type is ClusterIP, which has no node port. Fix: set type NodePort or LoadBalancer, or nodePort 0" (int $svc.nodePort)) -}}
{{- end -}}
{{- if eq (int .Values.router.containerPort) (int .Values.router.adminPort) -}}
  {{- $errs = append $errs "router.adminPort: equals router.containerPort. Fix: give them different ports" -}}
{{- end -}}
{{- with .Values.router.endpoint -}}
  {{- if not (regexMatch "^wss://[^\\s/?#]+(/[^\\s]*)?$" .) -}}
    {{- $errs = append $errs (printf "router.endpoint: %q is not a wss:// URL. Fix: set router.endpoint to the routers' external URL, e.g. wss://switchyard.example.com" .) -}}
  {{- end -}}
{{- end -}}

{{- /* ---- scheduling ---- */ -}}
{{- range $component := list "controlPlane" "router" -}}
  {{- $v := index $.Values $component -}}
  {{- if and (eq $v.podAntiAffinity "hard") (hasKey ($v.affinity | default dict) "podAntiAffinity") -}}
    {{- $errs = append $errs (printf "%s.podAntiAffinity: is hard, but %s.affinity.podAntiAffinity is set too and would replace it. Fix: set podAntiAffinity: \"\" and keep your own affinity.podAntiAffinity, or remove it" $component $component) -}}
  {{- end -}}
  {{- $seen := list -}}
  {{- range $i, $c := $v.topologySpread -}}
    {{- $key := printf "%s/%s" $c.topologyKey ($c.whenUnsatisfiable | default "ScheduleAnyway") -}}
    {{- if has $key $seen -}}
      {{- $errs = append $errs (printf "%s.topologySpread[%d]: repeats topologyKey %s with whenUnsatisfiable %s, which Kubernetes refuses. Fix: keep one entry per topologyKey and whenUnsatisfiable" $component $i $c.topologyKey ($c.whenUnsatisfiable | default "ScheduleAnyway")) -}}
    {{- end -}}
    {{- $seen = append $seen $key -}}
  {{- end -}}
{{- end -}}

{{- /* ---- network policies ---- */ -}}
{{- $np := .Values.networkPolicy -}}
{{- if $np.enabled -}}
  {{- if not $np.metricsFrom -}}
    {{- $errs = append $errs "networkPolicy.metricsFrom: is empty, which a NetworkPolicy reads as \"from anywhere\". Fix: name who scrapes /metrics (e.g. a namespaceSelector of your monitoring namespace), or [{namespaceSelector: {}}] for every namespace" -}}
  {{- end -}}
  {{- if not $np.controlPlaneEgress -}}
    {{- $errs = append $errs "networkPolicy.controlPlaneEgress: is empty, which denies all egress and cuts the control plane off from the Kubernetes API. Fix: keep [{}] (any destination) or list the API servers, DNS and AWS STS it calls" -}}
  {{- end -}}
  {{- if not $np.routerEgress -}}
    {{- $errs = append $errs "networkPolicy.routerEgress: is empty, which denies all egress and cuts the routers off from the control plane and the agents. Fix: keep [{}] (any destination) or list the control plane, the agents' namespaces and other clusters' routers" -}}
  {{- end -}}
  {{- $peers := dict -}}
  {{- range $field := list "metricsFrom" "routerFrom" -}}
    {{- range $i, $p := index $np $field -}}{{- $_ := set $peers (printf "networkPolicy.%s[%d]" $field $i) $p -}}{{- end -}}
  {{- end -}}
  {{- range $field := list "controlPlaneEgress" "routerEgress" -}}
    {{- range $i, $rule := index $np $field -}}
      {{- range $j, $p := $rule.to -}}{{- $_ := set $peers (printf "networkPolicy.%s[%d].to[%d]" $field $i $j) $p -}}{{- end -}}
    {{- end -}}
  {{- end -}}
  {{- $cidr := "^([0-9]{1,3}\\.){3}[0-9]{1,3}/[0-9]{1,2}$|^[0-9a-fA-F:]+/[0-9]{1,3}$" -}}
  {{- range $at := keys $peers | sortAlpha -}}
    {{- with (get $peers $at).ipBlock -}}
      {{- if not (regexMatch $cidr .cidr) -}}
        {{- $errs = append $errs (printf "%s.ipBlock.cidr: %q is not a CIDR. Fix: write an address block like 10.0.0.0/8" $at .cidr) -}}
      {{- end -}}
      {{- range $k, $e := .except -}}
        {{- if not (regexMatch $cidr $e) -}}
          {{- $errs = append $errs (printf "%s.ipBlock.except[%d]: %q is not a CIDR. Fix: write an address block like 10.1.0.0/16" $at $k $e) -}}
        {{- end -}}
      {{- end -}}
    {{- end -}}
  {{- end -}}
{{- end -}}

{{- /* ---- label and annotation keys (values.schema.json types the values; a key error there names no field) ---- */ -}}
{{- $keyed := dict -}}
{{- range $component := list "controlPlane" "router" -}}
  {{- range $field := list "podLabels" "podAnnotations" "nodeSelector" -}}
    {{- $_ := set $keyed (printf "%s.%s" $component $field) (index $.Values $component $field | default dict) -}}
  {{- end -}}
{{- end -}}
{{- $_ := set $keyed "controlPlane.serviceAccountAnnotations" (.Values.controlPlane.serviceAccountAnnotations | default dict) -}}
{{- $_ := set $keyed "router.service.annotations" (.Values.router.service.annotations | default dict) -}}
{{- $_ := set $keyed "metrics.serviceMonitor.labels" (.Values.metrics.serviceMonitor.labels | default dict) -}}
{{- $_ := set $keyed "metrics.grafanaDashboard.labels" (.Values.metrics.grafanaDashboard.labels | default dict) -}}
{{- range $field := list "metricsFrom" "routerFrom" -}}
  {{- range $i, $p := index $.Values.networkPolicy $field -}}
    {{- range $selector := list "namespaceSelector" "podSelector" -}}
      {{- with (get $p $selector | default dict).matchLabels -}}
        {{- $_ := set $keyed (printf "networkPolicy.%s[%d].%s.matchLabels" $field $i $selector) . -}}
      {{- end -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- $qualified := "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$" -}}
{{- range $at := keys $keyed | sortAlpha -}}
  {{- $bytes := 0 -}}
  {{- range $key, $value := get $keyed $at -}}{{- $bytes = add $bytes (len $key) (len (toString $value)) -}}{{- end -}}
  {{- /* Kubernetes refuses annotations over 256 KiB in all; the chart adds a few of its own. */ -}}
  {{- if gt $bytes 250000 -}}
    {{- $errs = append $errs (printf "%s: %d bytes of keys and values, more than the 256 KiB Kubernetes allows for an object's annotations. Fix: shorten them (store large data in a ConfigMap)" $at $bytes) -}}
  {{- end -}}
  {{- range $key := keys (get $keyed $at) | sortAlpha -}}
    {{- if or (gt (len $key) 317) (not (regexMatch $qualified $key)) -}}
      {{- $errs = append $errs (printf "%s: key %q is not a label or annotation key. Fix: write [prefix/]name: an optional DNS-subdomain prefix, then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. example.com/team)" $at (trunc 80 $key)) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}

{{- /* ---- agent TLS (the schema checks DNS syntax; an address passes it, SNI refuses it) ---- */ -}}
{{- $agentServerName := .Values.tls.agentServerName | default "" -}}
{{- if regexMatch "^[0-9.]+$" $agentServerName -}}
  {{- $errs = append $errs (printf "tls.agentServerName: %q is an IP address, but routers send it as TLS SNI, which carries DNS names only. Fix: set a DNS name the agent certificate carries, e.g. switchyard-agent" $agentServerName) -}}
{{- end -}}

{{- /* ---- sessions allow-list ---- */ -}}
{{- range $i, $ns := .Values.sessions.allowedNamespaces -}}
  {{- if not (regexMatch $label $ns) -}}
    {{- $errs = append $errs (printf "sessions.allowedNamespaces[%d]: %q is not a namespace name. Fix: use an RFC 1123 label" $i $ns) -}}
  {{- end -}}
{{- end -}}
{{- /* The syntax of ALLOWED_TARGET_PATTERN (proto/api/v1alpha1/schema-primitives.ts), as the control plane checks it. */ -}}
{{- $targetPattern := "^[a-z0-9*]([-a-z0-9*]{0,61}[a-z0-9*])?/(\\*|deployment|statefulset|pod)/[a-z0-9*]([-a-z0-9.*]{0,251}[a-z0-9*])?$" -}}
{{- range $i, $t := .Values.sessions.allowedTargets -}}
  {{- if not (regexMatch $targetPattern $t) -}}
    {{- $errs = append $errs (printf "sessions.allowedTargets[%d]: %q is not a target pattern. Fix: write <namespace>/<kind>/<name> with kind deployment, statefulset, pod or *, and * for any run of characters in a part (e.g. shop/deployment/api-*)" $i $t) -}}
  {{- end -}}
{{- end -}}

{{- /* ---- database branching ---- */ -}}
{{- if and .Values.branching.defaultCluster (eq $mode "primary") -}}
  {{- $errs = append $errs "branching.defaultCluster: a primary-only control plane serves no workloads, so it cannot be the Default cluster. Fix: set multiCluster.defaultCluster on the Primary, and branching.defaultCluster: true on that cluster's own install" -}}
{{- end -}}
{{- if and .Values.branching.defaultCluster $mc.enabled $mc.defaultCluster $clusterName (ne $mc.defaultCluster $clusterName) -}}
  {{- $errs = append $errs (printf "branching.defaultCluster: this Primary (%s) is not the Default: multiCluster.defaultCluster names %s. Fix: set branching.defaultCluster: false here, or multiCluster.defaultCluster: %s" $clusterName $mc.defaultCluster $clusterName) -}}
{{- end -}}
{{- range $engine := list "postgres" "mysql" -}}
{{- $srv := get $.Values.branching $engine -}}
{{- if eq $srv.provisioner "pod" -}}
  {{- if not $srv.pod.image -}}
    {{- $errs = append $errs (printf "branching.%s.pod.image: the pod provisioner needs the database image each branch pod runs. Fix: set it (e.g. %s), or branching.%s.provisioner: server" $engine (ternary "postgres:17" "mariadb:11" (eq $engine "postgres")) $engine) -}}
  {{- end -}}
  {{- if $srv.urlSecret.name -}}
    {{- $errs = append $errs (printf "branching.%s.urlSecret.name: the server that holds branches is for the server provisioner, not pod. Fix: set it to \"\", or branching.%s.provisioner: server" $engine $engine) -}}
  {{- end -}}
{{- else if $srv.pod.image -}}
  {{- $errs = append $errs (printf "branching.%s.pod.image: only the pod provisioner runs an image. Fix: set branching.%s.provisioner: pod, or the image to \"\"" $engine $engine) -}}
{{- end -}}
{{- end -}}

{{- /* ---- SQS queue splitting: the rules of control-plane/src/queues/queue-options.ts (values.schema.json checks types and characters) ---- */ -}}
{{- $sqs := .Values.queues.sqs -}}
{{- if and $sqs.enabled (eq $mode "primary") -}}
  {{- $errs = append $errs "queues.sqs.enabled: a primary-only control plane splits no queues: each workload cluster's control plane does, and the Primary forwards the sessions' splits to them without it. Fix: set queues.sqs.enabled: true on the workload clusters' installs, and false here" -}}
{{- end -}}
{{- if and $sqs.region (not (regexMatch "^[a-z]{2}(-[a-z]+)+-[0-9]+$" $sqs.region)) -}}
  {{- $errs = append $errs (printf "queues.sqs.region: %q is not an AWS region. Fix: set it to the queues' region, like eu-north-1, or \"\" for the region of the control plane's AWS environment (AWS_REGION)" $sqs.region) -}}
{{- end -}}
{{- if and $sqs.endpoint (not (regexMatch "^https?://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?(/[^\\s?#]*)?$" $sqs.endpoint)) -}}
  {{- $errs = append $errs (printf "queues.sqs.endpoint: %q is not an http(s) URL without query. Fix: set the SQS-compatible server's URL, e.g. http://elasticmq.queues.svc:9324, or \"\" for AWS's regional endpoint" $sqs.endpoint) -}}
{{- end -}}
{{- if and (not $sqs.enabled) (or $sqs.region $sqs.endpoint) -}}
  {{- $errs = append $errs (printf "queues.sqs.%s: has no effect while queues.sqs.enabled is false. Fix: set queues.sqs.enabled: true, or set it to \"\"" (ternary "region" "endpoint" (not (empty $sqs.region)))) -}}
{{- end -}}
{{- if and (not $sqs.enabled) $sqs.credentialsSecret -}}
  {{- $errs = append $errs "queues.sqs.credentialsSecret: has no effect while queues.sqs.enabled is false. Fix: set queues.sqs.enabled: true, or set it to \"\"" -}}
{{- end -}}
{{- $inj := .Values.sidecar.injection -}}
{{- if and $inj.enabled (not $inj.caBundle) (not $inj.certManagerCertificate) -}}
  {{- $errs = append $errs "sidecar.injection: enabled needs the CA the API server verifies the webhook with. Fix: set sidecar.injection.caBundle to the base64 PEM CA of tls.secretName, or sidecar.injection.certManagerCertificate to <namespace>/<name> of its cert-manager Certificate" -}}
{{- end -}}
{{- if and $inj.caBundle $inj.certManagerCertificate -}}
  {{- $errs = append $errs "sidecar.injection: caBundle and certManagerCertificate both set. Fix: keep one (cert-manager would overwrite caBundle)" -}}
{{- end -}}

{{- if $errs -}}
{{- fail (printf "\nswitchyard values are invalid (%d problem%s):\n  - %s" (len $errs) (ternary "" "s" (eq (len $errs) 1)) (join "\n  - " $errs)) -}}
{{- end -}}
{{- end -}}

{{/*
A Kubernetes quantity (values.schema.json checks its shape) as a plain number, to compare a
request with its limit: 500m → 0.5, 2Gi → 2147483648, 1e3 → 1000.
*/}}
{{- define "switchyard.quantityValue" -}}
{{- $q := toString . -}}
{{- $suffix := regexFind "(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)$" $q -}}
{{- $factors := dict "" 1.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- mulf (trimSuffix $suffix $q | float64) (get $factors $suffix) -}}
{{- end -}}
