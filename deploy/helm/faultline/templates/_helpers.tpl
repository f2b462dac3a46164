{{/* Object names: the release name, then what the object is for. */}}
{{- define "faultline.name" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "faultline.labels" -}}
app.kubernetes.io/name: faultline
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The ServiceAccount the Job runs as: observer or actor. */}}
{{- define "faultline.serviceAccount" -}}
{{- if not (has .Values.job.serviceAccount (list "observer" "actor")) -}}
{{- fail (printf "job.serviceAccount must be observer or actor, not %q" .Values.job.serviceAccount) -}}
{{- end -}}
{{ include "faultline.name" . }}-{{ .Values.job.serviceAccount }}
{{- end -}}

{{/* The labels of a run's pod: the chart's, and the component the stop hook looks for. */}}
{{- define "faultline.runLabels" -}}
{{ include "faultline.labels" . }}
app.kubernetes.io/component: run
{{- end -}}

{{/*
The pod of a run: faultline with the experiments, their setup manifests and the inventory
mounted from ConfigMaps, reports on the PVC (or an emptyDir), POD_NAME and POD_NAMESPACE
from the downward API (a run refuses to fault the node its own pod runs on), then the
summary and each JUnit file printed to the log. The pod's exit code is faultline's.

Kubernetes signals only PID 1 when the pod is stopped (the Job deleted, `helm uninstall`
or `upgrade`, activeDeadlineSeconds, a drain, an eviction, preemption): PID 1 is the shell,
which hands SIGTERM on to faultline and waits for it, and faultline undoes its faults
within terminationGracePeriodSeconds. A journal on the reports volume that still holds
faults (a run killed before it could undo) is restored before the next run.
*/}}
{{- define "faultline.podSpec" -}}
serviceAccountName: {{ include "faultline.serviceAccount" . }}
restartPolicy: Never
terminationGracePeriodSeconds: {{ .Values.job.terminationGracePeriodSeconds }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
{{- with .Values.job.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.job.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.job.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: faultline
    image: {{ include "faultline.image" . | quote }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
    env:
      - name: POD_NAME
        valueFrom: {fieldRef: {fieldPath: metadata.name}}
      - name: POD_NAMESPACE
        valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
      - name: FAULTLINE_COMMAND
        value: {{ .Values.job.command | quote }}
      - name: FAULTLINE_ARGS
        value: {{ .Values.job.extraArgs | join " " | quote }}
      - name: FAULTLINE_COMPARE
        value: {{ .Values.job.compareWithPrevious | quote }}
      - name: FAULTLINE_COMPARE_ARGS
        value: {{ .Values.job.compareArgs | join " " | quote }}
    command: ["/bin/sh", "-c"]
    args:
      - |
        out="/reports/$(date -u +%Y%m%dT%H%M%SZ)-$POD_NAME"
        mkdir -p "$out"
        inv=/etc/faultline/inventory/inventory.yaml
        exps=/etc/faultline/experiments
        journal=/reports/journal.json
        # faultline runs as this shell's child: a signal to the pod (PID 1, this shell) is
        # handed on to it, and the shell waits until faultline has undone and exited.
        child=""
        trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT HUP
        fl() {
          faultline "$@" &
          child=$!
          wait "$child"; code=$?
          while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
          child=""
          return "$code"
        }
        # A run killed before it could undo (SIGKILL, a node lost under the pod) left its
        # faults in the journal on the volume: they are restored first, or nothing runs.
        restore_first() {
          if [ -s "$journal" ] && grep -q '"node"' "$journal"; then
            echo "=== the journal $journal holds faults an earlier run left: faultline restore first"
            fl restore -i "$inv" --journal "$journal"; rc=$?
            echo "=== faultline restore exited $rc"
            return "$rc"
          fi
        }
        case "$FAULTLINE_COMMAND" in
          restore) fl restore -i "$inv" --journal "$journal" $FAULTLINE_ARGS; code=$? ;;
          run)
            restore_first || { echo "=== not running: the faults left behind are not all restored"; exit 2; }
            # The previous run's reports on the volume are this run's baseline: a
            # regression beyond the tolerance (extraArgs: --tolerance ...) fails the Job.
            baseline=""
            if [ "$FAULTLINE_COMPARE" = "true" ]; then
              for d in $(ls -1d /reports/*/ 2>/dev/null | sort -r); do
                [ "$d" = "$out/" ] && continue
                if ls "$d"*.json >/dev/null 2>&1; then baseline="$d"; break; fi
              done
              if [ -n "$baseline" ]; then echo "=== comparing with the previous run in $baseline"
              else echo "=== no earlier run on /reports: nothing to compare with yet"; fi
            fi
            fl run "$exps" -i "$inv" --yes --out "$out" --summary "$out/summary.md" \
              --journal "$journal" ${baseline:+--baseline "$baseline" $FAULTLINE_COMPARE_ARGS} \
              $FAULTLINE_ARGS
            code=$?
            echo "=== summary ($out/summary.md)"
            cat "$out/summary.md" 2>/dev/null
            for f in "$out"/*.junit.xml; do
              [ -f "$f" ] && { echo "=== JUnit $f"; cat "$f"; }
            done ;;
          doctor) fl doctor -i "$inv" "$exps" $FAULTLINE_ARGS; code=$? ;;
          plan) fl plan -i "$inv" "$exps" $FAULTLINE_ARGS; code=$? ;;
          validate) fl validate "$exps" $FAULTLINE_ARGS; code=$? ;;
          *) echo "job.command must be run, restore, doctor, plan or validate, not $FAULTLINE_COMMAND"; code=2 ;;
        esac
        echo "=== faultline $FAULTLINE_COMMAND exited $code"
        exit $code
    {{- with .Values.job.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumeMounts:
      - {name: experiments, mountPath: /etc/faultline/experiments, readOnly: true}
      - {name: manifests, mountPath: /etc/faultline/manifests, readOnly: true}
      - {name: inventory, mountPath: /etc/faultline/inventory, readOnly: true}
      - {name: reports, mountPath: /reports}
      - {name: tmp, mountPath: /tmp}
volumes:
  - name: experiments
    configMap: {name: {{ include "faultline.name" . }}-experiments}
  - name: manifests
    configMap: {name: {{ include "faultline.name" . }}-manifests}
  - name: inventory
    configMap: {name: {{ include "faultline.name" . }}-inventory}
  - name: tmp
    emptyDir: {}
  - name: reports
  {{- if .Values.reports.persistence.enabled }}
    persistentVolumeClaim: {claimName: {{ include "faultline.name" . }}-reports}
  {{- else }}
    emptyDir: {}
  {{- end }}
{{- end -}}

{{/*
The faultline image: by digest when `image.digest` is set (repository:tag@digest, so the
tag stays readable and the digest decides what runs), else by tag.
*/}}
{{- define "faultline.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}
