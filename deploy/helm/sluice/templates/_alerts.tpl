{{/*
sluice.alertRules: Prometheus rule groups for sluice's metrics, as a rule
file (groups: ...). The PrometheusRule's spec and the alerts ConfigMap
render it; `make manifests` writes deploy/prometheus/alerts.yml from it
with the chart's defaults. Prometheus's own templates in annotations are
quoted for Helm as {{`{{ ... }}`}}. Every series is summed by namespace,
job and stage (or instance), so that replicas aggregate and two services
running sluice never mix.
*/}}
{{- define "sluice.alertRules" -}}
{{- $a := .Values.alerts -}}
{{- $by := "namespace, job, stage" -}}
# Alert rules for sluice's Prometheus metrics (GET /metrics on the admin
# listener), generated from the Helm chart deploy/helm/sluice
# (templates/_alerts.tpl) with its values `alerts.*`: change them there
# and run `make manifests`. Load the file with `rule_files: [alerts.yml]`.
# docs/operations.md ("Alerts") says what each alert means and what to
# do; deploy/prometheus/alerts_test.yml and alerts_days_test.yml test
# each with promtool.
groups:
  - name: sluice-slo
    # Service-level objectives on sluice_request_duration_seconds, the
    # multiwindow, multi-burn-rate alerts of the Google SRE workbook
    # ("Alerting on SLOs"). The SLI: requests answered by the backend
    # (outcome ok) within the SLO latency, among all requests; the
    # rejected (503/429) and the errors (5xx, 502/504) count as bad (a
    # stage with no good answer at all has an error ratio of 1). The
    # error budget is 1 - objective. The rules read the classic buckets:
    # a Prometheus that ingests native histograms needs
    # always_scrape_classic_histograms (scrape_classic_histograms before
    # 3.0) to keep them. The latency must be a bucket
    # boundary of the histogram (0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5
    # 5 10 seconds), normally the stage's SLO (auto's slo).
    rules:
{{- range $slo := $a.slos }}
{{- $le := printf "le=%q" $slo.latency }}
{{- if not (contains "." $slo.latency) }}
{{- /* Prometheus 3 writes the integer buckets as "1.0". */}}
{{- $le = printf "le=~\"%s|%s.0\"" $slo.latency $slo.latency }}
{{- end }}
{{- range $w := list "5m" "30m" "1h" "2h" "6h" "1d" "3d" }}
      - record: sluice:slo_errors:ratio_rate{{ $w }}
        expr: |
          (
            sum by ({{ $by }}) (rate(sluice_request_duration_seconds_count{stage=~{{ $slo.stages | quote }}}[{{ $w }}]))
            -
            (
              sum by ({{ $by }}) (rate(sluice_request_duration_seconds_bucket{stage=~{{ $slo.stages | quote }}, outcome="ok", {{ $le }}}[{{ $w }}]))
              or
              0 * sum by ({{ $by }}) (rate(sluice_request_duration_seconds_count{stage=~{{ $slo.stages | quote }}}[{{ $w }}]))
            )
          )
          /
          sum by ({{ $by }}) (rate(sluice_request_duration_seconds_count{stage=~{{ $slo.stages | quote }}}[{{ $w }}]))
        labels:
          slo: {{ $slo.name | quote }}
          slo_latency_seconds: {{ $slo.latency | quote }}
          slo_objective: {{ $slo.objective | toString | quote }}
{{- end }}

      - alert: SluiceErrorBudgetBurn
        # Fast burn, a page: at 14.4x the budget's rate for 1 hour (2 % of
        # a 30-day budget), confirmed over the last 5 minutes, or at 6x for
        # 6 hours (5 %), confirmed over 30 minutes.
        expr: |
          (
            sluice:slo_errors:ratio_rate1h{slo={{ $slo.name | quote }}} > (14.4 * (1 - {{ $slo.objective }}))
            and
            sluice:slo_errors:ratio_rate5m{slo={{ $slo.name | quote }}} > (14.4 * (1 - {{ $slo.objective }}))
          )
          or
          (
            sluice:slo_errors:ratio_rate6h{slo={{ $slo.name | quote }}} > (6 * (1 - {{ $slo.objective }}))
            and
            sluice:slo_errors:ratio_rate30m{slo={{ $slo.name | quote }}} > (6 * (1 - {{ $slo.objective }}))
          )
        labels:
          severity: critical
        annotations:
          summary: {{ printf "sluice stage {{ $labels.stage }} burns its error budget fast: {{ $value | humanizePercentage }} of requests miss the %ss SLO" $slo.latency | quote }}
          description: {{ printf "Fewer than %v of the requests were answered within %ss (SLO %s); at this rate a 30-day budget lasts days. The rejected (503/429) and the errors count as misses: see which with sum by (outcome) (rate(sluice_request_duration_seconds_count{stage=\"{{ $labels.stage }}\"}[5m]))." $slo.objective $slo.latency $slo.name | quote }}

      - alert: SluiceErrorBudgetBurnSlow
        # Slow burn, a ticket: at 3x the budget's rate for a day (10 %),
        # confirmed over 2 hours, or at 1x for 3 days (10 %), confirmed
        # over 6 hours.
        expr: |
          (
            sluice:slo_errors:ratio_rate1d{slo={{ $slo.name | quote }}} > (3 * (1 - {{ $slo.objective }}))
            and
            sluice:slo_errors:ratio_rate2h{slo={{ $slo.name | quote }}} > (3 * (1 - {{ $slo.objective }}))
          )
          or
          (
            sluice:slo_errors:ratio_rate3d{slo={{ $slo.name | quote }}} > (1 - {{ $slo.objective }})
            and
            sluice:slo_errors:ratio_rate6h{slo={{ $slo.name | quote }}} > (1 - {{ $slo.objective }})
          )
        labels:
          severity: warning
        annotations:
          summary: {{ printf "sluice stage {{ $labels.stage }} burns its error budget: {{ $value | humanizePercentage }} of requests miss the %ss SLO" $slo.latency | quote }}
          description: {{ printf "More than the budget of SLO %s (%v within %ss) has been missed for hours: the budget will not last its period." $slo.name $slo.objective $slo.latency | quote }}
{{- end }}

  - name: sluice
    rules:
      - alert: SluiceObjectiveMissed
        # A stage's answers miss the statistic its controller holds, over
        # all replicas, for {{ $a.objectiveMissed.for }}: p99 against auto's SLO,
        # p90 against seda's target, the mean against yaksha's tref
        # (proxy_stage_target_seconds and its objective label), from the
        # answered requests (outcome ok) only. Below {{ $a.objectiveMissed.minRequestRate }} req/s the
        # quantile is noise and the alert stays quiet.
        expr: |
          (
            (
              histogram_quantile(0.99, sum by ({{ $by }}, le) (rate(sluice_request_duration_seconds_bucket{outcome="ok"}[5m])))
                > on ({{ $by }}) group_left ()
              max by ({{ $by }}) (proxy_stage_target_seconds{objective=~"target|p99"})
            )
            or
            (
              histogram_quantile(0.9, sum by ({{ $by }}, le) (rate(sluice_request_duration_seconds_bucket{outcome="ok"}[5m])))
                > on ({{ $by }}) group_left ()
              max by ({{ $by }}) (proxy_stage_target_seconds{objective="p90"})
            )
            or
            (
              sum by ({{ $by }}) (rate(sluice_request_duration_seconds_sum{outcome="ok"}[5m]))
                / sum by ({{ $by }}) (rate(sluice_request_duration_seconds_count{outcome="ok"}[5m]))
                > on ({{ $by }}) group_left ()
              max by ({{ $by }}) (proxy_stage_target_seconds{objective="mean"})
            )
          )
          and on ({{ $by }})
          sum by ({{ $by }}) (rate(sluice_request_duration_seconds_count{outcome="ok"}[5m])) >= {{ $a.objectiveMissed.minRequestRate }}
        for: {{ $a.objectiveMissed.for }}
        labels:
          severity: warning
        annotations:
          summary: "sluice stage {{`{{ $labels.stage }}`}} misses its response-time objective ({{`{{ $value | humanizeDuration }}`}})"
          description: "The answers' statistic the stage's controller holds has been above its target for {{ $a.objectiveMissed.for }}. Look at /state or /ui: a limit at its floor means the backend is slow even when barely loaded; a limit far above the in-flight requests means the time is spent elsewhere (queue wait, upstream)."

      - alert: SluiceControllerAtFloor
        # The controller has cut to its most restrictive setting and stayed
        # there: the lowest rate (seda, voigt, kihl), the highest drop
        # probability (yaksha) or the smallest concurrency limit (auto's
        # min_limit). It cannot shed more, and what it admits still misses
        # the objective.
        expr: |
          (
            sluice_gate_setting{kind=~"rate|concurrency"}
              <= ignoring (class) group_left ()
            (proxy_stage_setting_floor{kind=~"rate|concurrency"} * 1.0001)
          )
          or
          (
            sluice_gate_setting{kind="drop_probability"}
              >= ignoring (class) group_left ()
            (proxy_stage_setting_floor{kind="drop_probability"} * 0.9999)
          )
        for: {{ $a.floor.for }}
        labels:
          severity: critical
        annotations:
          summary: "sluice stage {{`{{ $labels.stage }}`}} (class {{`{{ $labels.class }}`}}) has been at its controller's floor for {{ $a.floor.for }}"
          description: "The gate ({{`{{ $labels.kind }}`}} {{`{{ $value }}`}}) is as restrictive as the controller allows and the backend still misses the objective: the backend is degraded or the objective is out of its reach."

      - alert: SluiceSustainedShedding
        # More than {{ $a.shedding.fraction }} of a stage's requests rejected for {{ $a.shedding.for }}:
        # overloaded for a while (or its objective is too tight). Shadow
        # mode counts would-be rejections apart (shadow_rejected).
        expr: |
          sum by ({{ $by }}) (rate(sluice_requests_total{outcome="rejected"}[5m]))
            / sum by ({{ $by }}) (rate(sluice_requests_total{outcome="offered"}[5m]))
            > {{ $a.shedding.fraction }}
        for: {{ $a.shedding.for }}
        labels:
          severity: warning
        annotations:
          summary: "sluice stage {{`{{ $labels.stage }}`}} rejects {{`{{ $value | humanizePercentage }}`}} of its requests"
          description: "Sustained admission-control rejections for {{ $a.shedding.for }}: add capacity (sluice_demand_ratio says how much), or check /ui for the decisions and their reasons."

      - alert: SluiceClusterFallback
        # An instance in cluster mode enforces 1/N of every global budget
        # on its own: Redis unreachable, or no sync since it started.
        expr: max by (namespace, job, instance) (sluice_cluster_fallback) > 0
        for: {{ $a.clusterFallback.for }}
        labels:
          severity: warning
        annotations:
          summary: "sluice {{`{{ $labels.instance }}`}} has enforced cluster mode's fallback for {{ $a.clusterFallback.for }}"
          description: "The instance cannot sync with Redis; its share of the global budgets is fixed at 1/N. See sluice_cluster_syncs_total{result=\"error\"} and the instance's log."

      - alert: SluiceBackendErrors
        # Upstream exchanges failing (refused, timeouts, closed, TLS), or
        # more than 5 % of a stage's completed requests ending in an error.
        expr: |
          sum by (namespace, job, backend) (rate(proxy_upstream_errors_total[5m])) > 1
          or
          (
            sum by ({{ $by }}) (rate(sluice_requests_total{outcome="error"}[5m]))
              / sum by ({{ $by }}) (rate(sluice_requests_total{outcome="completed"}[5m])) > 0.05
          )
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "sluice sees backend errors ({{`{{ $labels.backend }}{{ $labels.stage }}: {{ printf \"%.3g\" $value }}`}})"
          description: "proxy_upstream_errors_total by cause tells which failure; proxy_gateway_errors_total counts the 502/504 answers."

      - alert: SluiceSensorFailures
        # A sensor keeps failing (its last reading is NaN or its error
        # count grows): the controllers fed by it hold their setting.
        expr: |
          rate(proxy_sensor_errors_total[5m]) > 0
          or
          (proxy_sensor_value != proxy_sensor_value)
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "sluice sensor {{`{{ $labels.sensor }}`}} ({{`{{ $labels.source }}`}}) is failing"
          description: "See the sensors' errors in /state or /ui on the admin listener."

      - alert: SluicePoolSaturated
        # The backend pool answers 503 itself (queue full or timed out):
        # admission control lets through more than the servers' limits
        # and the queue can hold.
        expr: sum by (namespace, job) (rate(proxy_pool_rejected_total[5m])) > 1
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "sluice's backend pool rejects {{`{{ $value }}`}} requests/s (queue full or timed out)"
          description: "proxy_pool_rejected_total by cause says which; raise backends.queue or the servers' max_concurrency only if the backend can take it."

      - alert: SluiceNotReady
        # /readyz has answered 503 for 5 minutes: no backend server
        # answers a TCP connect (or, with health.ready_shed, the instance
        # sheds too much). Kubernetes keeps it out of its Service.
        expr: max by (namespace, job, instance) (proxy_ready) == 0
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "sluice {{`{{ $labels.instance }}`}} is not ready"
          description: "GET /readyz on the admin listener says why (docs/operations.md#probes)."

      - alert: SluiceDemandAboveCapacity
        # Offered load has stayed above the capacity sluice measures for
        # 15 minutes: the autoscaler (if any) is at its maximum or not
        # keeping up, and the excess is being shed
        # (docs/operations.md#autoscaling).
        expr: max by ({{ $by }}) (sluice_demand_ratio) > 1.5
        for: 15m
        labels:
          severity: warning
        annotations:
          summary: "sluice stage {{`{{ $labels.stage }}`}} is offered {{`{{ $value | humanize }}`}}x the capacity it measures"
          description: "Scale the backend out (or raise the HPA's maxReplicas); sluice sheds the excess meanwhile."
{{- end -}}
