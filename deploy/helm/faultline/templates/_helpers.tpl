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

{{/*
The pod of a run: faultline with the experiments, their setup manifests and the inventory
mounted from ConfigMaps, reports on the PVC (or an emptyDir), POD_NAME and POD_NAMESPACE
from the downward API (a run refuses to fault the node its own pod runs on), then the
summary and each JUnit file printed to the log. The pod's exit code is faultline's.
*/}}
{{- define "faultline.podSpec" -}}
serviceAccountName: {{ include "faultline.serviceAccount" . }}
restartPolicy: Never
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
    image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
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
        case "$FAULTLINE_COMMAND" in
          run)
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
            faultline run "$exps" -i "$inv" --yes --out "$out" --summary "$out/summary.md" \
              --journal /reports/journal.json ${baseline:+--baseline "$baseline" $FAULTLINE_COMPARE_ARGS} \
              $FAULTLINE_ARGS
            code=$?
            echo "=== summary ($out/summary.md)"
            cat "$out/summary.md" 2>/dev/null
            for f in "$out"/*.junit.xml; do
              [ -f "$f" ] && { echo "=== JUnit $f"; cat "$f"; }
            done ;;
          doctor) faultline doctor -i "$inv" "$exps" $FAULTLINE_ARGS; code=$? ;;
          plan) faultline plan -i "$inv" "$exps" $FAULTLINE_ARGS; code=$? ;;
          validate) faultline validate "$exps" $FAULTLINE_ARGS; code=$? ;;
          *) echo "job.command must be run, doctor, plan or validate, not $FAULTLINE_COMMAND"; code=2 ;;
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
