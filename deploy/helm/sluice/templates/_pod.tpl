{{/*
Shutdown, worked out once for every container (docs/operations.md,
"Shutdown ordering"). P = shutdown.preStopSeconds, D =
shutdown.drainTimeoutSeconds, S = app.shutdownSeconds.

Edge: sluice's preStop sleeps P while the endpoints controller takes
the pod out of the Service, then SIGTERM drains for up to D.

Sidecar, classic: both containers get their preStop at once, and each
its SIGTERM when its own preStop ends. sluice sleeps P, then drains for
up to D; the app sleeps P + D, so it serves every request sluice still
forwards, and stops (within S) only after sluice has drained.

Sidecar, native (an init container with restartPolicy Always): the
kubelet stops the app first and sluice only after the app has exited.
The app's preStop sleeps P + D: the endpoints are gone after P, the
requests in flight through sluice have until P + D, then the app stops;
sluice then gets SIGTERM with nothing left to drain, so it needs no
preStop of its own.

Without the sleep action (Kubernetes before 1.30, shutdown.sleepAction),
the app's preStop runs `sleep` from its own image, and sluice's image
(no shell, no sleep) gets none: sluice stops accepting at SIGTERM.
*/}}
{{- define "sluice.appPreStopSeconds" -}}
{{- add (int .Values.shutdown.preStopSeconds) (int .Values.shutdown.drainTimeoutSeconds) -}}
{{- end -}}

{{- define "sluice.gracePeriod" -}}
{{- $p := int .Values.shutdown.preStopSeconds -}}
{{- $d := int .Values.shutdown.drainTimeoutSeconds -}}
{{- if eq .Values.mode "sidecar" -}}
{{- add $p $d (int .Values.app.shutdownSeconds) 5 -}}
{{- else -}}
{{- add $p $d 5 -}}
{{- end -}}
{{- end -}}

{{- define "sluice.sleep" -}}
{{- if .sleepAction -}}
preStop:
  sleep:
    seconds: {{ .seconds }}
{{- else -}}
preStop:
  exec:
    command: ["sleep", "{{ .seconds }}"]
{{- end -}}
{{- end -}}

{{/* The sluice container. Context: dict "root" $ "native" bool. */}}
{{- define "sluice.container" -}}
{{- $v := .root.Values -}}
{{- $sleep := include "sluice.sleepAction" .root -}}
- name: sluice
  image: {{ include "sluice.image" .root }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if .native }}
  # A native sidecar: started before the app, stopped after it.
  restartPolicy: Always
  {{- end }}
  args: ["proxy", "--config", "{{ include "sluice.configDir" .root }}/sluice.yaml"]
  ports:
    - name: http
      containerPort: {{ $v.listener.port }}
      protocol: TCP
    - name: admin
      containerPort: {{ $v.admin.port }}
      protocol: TCP
  # The probes are on the admin listener and need no token.
  startupProbe:
    httpGet:
      path: /healthz
      port: {{ $v.admin.port }}
    periodSeconds: 1
    failureThreshold: 30
  livenessProbe:
    httpGet:
      path: /healthz
      port: {{ $v.admin.port }}
    periodSeconds: 10
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /readyz
      port: {{ $v.admin.port }}
    periodSeconds: 2
    failureThreshold: 2
  {{- if and $sleep (not .native) }}
  lifecycle:
    # Out of the Service's endpoints before sluice stops accepting.
    {{- include "sluice.sleep" (dict "sleepAction" true "seconds" (int $v.shutdown.preStopSeconds)) | nindent 4 }}
  {{- end }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    # Directories, never subPath: kubelet updates them in place.
    - name: sluice-config
      mountPath: {{ include "sluice.configDir" .root }}
      readOnly: true
    - name: sluice-admin
      mountPath: {{ include "sluice.adminDir" .root }}
      readOnly: true
    - name: sluice-tmp
      mountPath: /tmp
{{- end -}}

{{/* The app's container (sidecar mode), with the chart's preStop. */}}
{{- define "sluice.appContainer" -}}
{{- $v := .Values -}}
{{- $c := deepCopy ($v.app.container | default dict) -}}
{{- if not $c.image -}}
{{- fail "app.container.image is required in sidecar mode: the app's image, e.g. registry.example.com/app:1.0" -}}
{{- end -}}
{{- $_ := set $c "name" ($c.name | default "app") -}}
{{- if eq $c.name "sluice" -}}
{{- fail "app.container.name must not be \"sluice\": that is the sidecar's name" -}}
{{- end -}}
{{- $lc := deepCopy ($c.lifecycle | default dict) -}}
{{- if $lc.preStop -}}
{{- fail "app.container.lifecycle.preStop is the chart's: it keeps the app serving until sluice has drained (shutdown.preStopSeconds + shutdown.drainTimeoutSeconds); lengthen those instead" -}}
{{- end -}}
{{- $hook := include "sluice.sleep" (dict "sleepAction" (include "sluice.sleepAction" .) "seconds" (include "sluice.appPreStopSeconds" .)) | fromYaml -}}
{{- $_ := set $lc "preStop" $hook.preStop -}}
{{- $_ := set $c "lifecycle" $lc -}}
{{- toYaml (list $c) -}}
{{- end -}}
