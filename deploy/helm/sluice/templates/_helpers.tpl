{{/* The chart's name. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of every object: the release's name (sidecar mode: it is the
app's Deployment), or fullnameOverride.
*/}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The image: repository:tag (the tag defaults to appVersion) or @digest. */}}
{{- define "sluice.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* "true" when sluice runs as a native sidecar (sidecar mode only). */}}
{{- define "sluice.native" -}}
{{- if eq .Values.mode "sidecar" -}}
{{- $n := toString .Values.sidecar.native -}}
{{- if eq $n "auto" -}}
{{- if semverCompare ">=1.29.0-0" .Capabilities.KubeVersion.Version }}true{{ end -}}
{{- else if eq $n "true" }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* "true" when preStop hooks may use the sleep action (Kubernetes 1.30+). */}}
{{- define "sluice.sleepAction" -}}
{{- $s := toString .Values.shutdown.sleepAction -}}
{{- if eq $s "auto" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}true{{ end -}}
{{- else if eq $s "true" }}true{{ end -}}
{{- end -}}

{{/* The admin token's Secret and key. */}}
{{- define "sluice.adminSecret" -}}
{{- .Values.admin.existingSecret | default (printf "%s-admin" (include "sluice.fullname" .)) -}}
{{- end -}}
{{- define "sluice.adminSecretKey" -}}
{{- if .Values.admin.existingSecret }}{{ .Values.admin.existingSecretKey }}{{ else }}token{{ end -}}
{{- end -}}

{{/* Where the sluice container finds its files. */}}
{{- define "sluice.configDir" -}}/etc/sluice{{- end -}}
{{- define "sluice.adminDir" -}}/etc/sluice-admin{{- end -}}

{{/* "true" when admin.public opens /metrics without the token. */}}
{{- define "sluice.metricsPublic" -}}
{{- if has "metrics" .Values.admin.public }}true{{ end -}}
{{- end -}}

{{/*
sluice.tmpBytes: the most the sluice container may write to /tmp, in
bytes, from the same values the configuration is rendered from:
  - request bodies: each client connection reads one body at a time
    (HTTP/1.1), and keeps up to max_request_body_bytes -
    request_buffer_bytes of it in a temporary file, so
    max_client_connections x that (when request_buffering is on);
  - response bodies: response_buffering.max_disk_bytes bounds all
    temporary files together (when buffering is on and max_file_bytes is
    not -1);
  - tmpExtraBytes beside them.
The emptyDir's sizeLimit is this, rounded up to MiB, so that kubelet
never evicts the pod for what its configuration allows.
*/}}
{{- define "sluice.tmpBytes" -}}
{{- $l := .Values.listener -}}
{{- $c := .Values.config -}}
{{- $req := int64 0 -}}
{{- if ne (toString $l.request_buffering) "false" -}}
{{- $body := int64 (required "listener.max_request_body_bytes must be set: the chart sizes /tmp from it" $l.max_request_body_bytes) -}}
{{- if lt $body 0 -}}
{{- fail "listener.max_request_body_bytes is -1 (no limit) while listener.request_buffering is on: request bodies could fill /tmp without bound; give a limit in bytes, or set request_buffering: false" -}}
{{- end -}}
{{- $mem := int64 (required "listener.request_buffer_bytes must be set: the chart sizes /tmp from it" $l.request_buffer_bytes) -}}
{{- $conns := int64 (required "config.max_client_connections must be set: the chart sizes /tmp from it (one request body per connection)" $c.max_client_connections) -}}
{{- if le $conns 0 -}}
{{- fail "config.max_client_connections must be a positive number here: the chart sizes /tmp from it (0 would mean the process's file-descriptor limit, unbounded for this purpose)" -}}
{{- end -}}
{{- if gt $body $mem -}}
{{- $req = mul $conns (sub $body $mem) -}}
{{- end -}}
{{- end -}}
{{- $resp := int64 0 -}}
{{- $rb := $c.response_buffering | default dict -}}
{{- if and (ne (toString $rb.enabled) "false") (ne (toString $rb.max_file_bytes) "-1") -}}
{{- $resp = int64 (required "config.response_buffering.max_disk_bytes must be set: the chart sizes /tmp from it" $rb.max_disk_bytes) -}}
{{- end -}}
{{- add $req $resp (int64 .Values.tmpExtraBytes) -}}
{{- end -}}

{{- define "sluice.tmpSizeLimit" -}}
{{- $b := int64 (include "sluice.tmpBytes" .) -}}
{{- printf "%dMi" (div (add $b 1048575) 1048576) -}}
{{- end -}}

{{/*
sluice.config: sluice.yaml. The user's `config` with what the chart
owns set over it: the one client listener (listener.*, on
0.0.0.0:listener.port, its request bodies spilled to /tmp), the admin
listener (on 0.0.0.0:admin.port with the token from the Secret), the
backend (upstream.url in edge mode, the app on 127.0.0.1:app.port in
sidecar mode) unless config.backends.servers names them, the response
buffers' directory (/tmp), drain_timeout and watch_config.
*/}}
{{- define "sluice.config" -}}
{{- $owned := dict "listeners" "set listener.* instead (the one client listener, on listener.port)" "admin" "set admin.* instead (port, token, public, pprof)" "drain_timeout" "set shutdown.drainTimeoutSeconds instead" "watch_config" "set watchConfig and configReload instead" -}}
{{- range $k, $why := $owned -}}
{{- if hasKey $.Values.config $k -}}
{{- fail (printf "config.%s is the chart's: %s" $k $why) -}}
{{- end -}}
{{- end -}}
{{- range $k := list "addr" "request_buffer_dir" -}}
{{- if hasKey $.Values.listener $k -}}
{{- fail (printf "listener.%s is the chart's: the listener is on 0.0.0.0:listener.port and spills to the emptyDir /tmp" $k) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.config.response_buffering (hasKey .Values.config.response_buffering "temp_dir") -}}
{{- fail "config.response_buffering.temp_dir is the chart's: responses spill to the emptyDir /tmp, sized from max_disk_bytes" -}}
{{- end -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $l := deepCopy .Values.listener -}}
{{- $_ := unset $l "port" -}}
{{- $_ := set $l "addr" (printf "0.0.0.0:%d" (int .Values.listener.port)) -}}
{{- $_ := set $l "request_buffer_dir" "/tmp" -}}
{{- $_ := set $cfg "listeners" (list $l) -}}
{{- $admin := dict "addr" (printf "0.0.0.0:%d" (int .Values.admin.port)) "allow_public" true "token_file" (printf "%s/%s" (include "sluice.adminDir" .) (include "sluice.adminSecretKey" .)) -}}
{{- range $k := list "addr" "allow_public" "token" "token_file" "public" "pprof" -}}
{{- if hasKey ($.Values.admin.config | default dict) $k -}}
{{- fail (printf "admin.config.%s is the chart's: set admin.port, admin.existingSecret or admin.token, admin.public, admin.pprof" $k) -}}
{{- end -}}
{{- end -}}
{{- $admin = merge $admin (deepCopy (.Values.admin.config | default dict)) -}}
{{- with .Values.admin.public }}{{ $_ := set $admin "public" . }}{{ end -}}
{{- if .Values.admin.pprof }}{{ $_ := set $admin "pprof" true }}{{ end -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- $b := $cfg.backends | default dict -}}
{{- if not $b.servers -}}
{{- $url := "" -}}
{{- if eq .Values.mode "sidecar" -}}
{{- $url = printf "http://127.0.0.1:%d" (int .Values.app.port) -}}
{{- else -}}
{{- $url = required "upstream.url is required in edge mode: the backend Service's URL, e.g. http://app.default.svc.cluster.local:8080 (or list config.backends.servers)" .Values.upstream.url -}}
{{- end -}}
{{- $_ := set $b "servers" (list (dict "url" $url "max_concurrency" (int .Values.upstream.maxConcurrency))) -}}
{{- end -}}
{{- $_ := set $cfg "backends" $b -}}
{{- $rb := $cfg.response_buffering | default dict -}}
{{- $_ := set $rb "temp_dir" "/tmp" -}}
{{- $_ := set $cfg "response_buffering" $rb -}}
{{- $_ := set $cfg "drain_timeout" (printf "%ds" (int .Values.shutdown.drainTimeoutSeconds)) -}}
{{- if eq .Values.configReload "watch" -}}
{{- $_ := set $cfg "watch_config" .Values.watchConfig -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
sluice.restartConfig: the parts of sluice.yaml that a reload cannot
change (docs/config.md, "Reload and shutdown"); their checksum in the pod
template rolls the pods when they change. With configReload "restart"
it is the whole file.
*/}}
{{- define "sluice.restartConfig" -}}
{{- $cfg := include "sluice.config" . | fromYaml -}}
{{- if eq .Values.configReload "watch" -}}
{{- toYaml (pick $cfg "listeners" "admin" "utilization" "resources" "policer" "max_client_connections" "telemetry") -}}
{{- else -}}
{{- toYaml $cfg -}}
{{- end -}}
{{- end -}}
