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
The data of the three ConfigMaps the Job runs from, as YAML (name: content), one helper
each so that the ConfigMaps and the pins below are made from the same text.
*/}}
{{- define "faultline.experimentsData" -}}
{{- if .Values.experiments }}
{{- toYaml .Values.experiments }}
{{- else }}
{{- (.Files.Glob "files/experiments/*.yaml").AsConfig }}
{{- end }}
{{- end -}}

{{- define "faultline.manifestsData" -}}
{{- if .Values.manifests }}
{{- toYaml .Values.manifests }}
{{- else }}
{{- (.Files.Glob "files/manifests/*.yaml").AsConfig }}
{{- end }}
{{- end -}}

{{- define "faultline.inventoryData" -}}
inventory.yaml: |
  {{- .Values.inventory | nindent 2 }}
{{- end -}}

{{/*
The pins: `DIR/NAME sha256:HEX` for every file of those ConfigMaps, written into the Job's
own spec at install or upgrade. `faultline job` runs nothing when what is mounted differs
(a ConfigMap edited since the release: `update configmaps` is in Kubernetes' usual `edit`
role; the Job's spec is what only a new release changes).
*/}}
{{- define "faultline.pins" -}}
{{- range $dir := list "experiments" "manifests" }}
{{- $given := index $.Values $dir }}
{{- if $given }}
{{- range $file, $text := $given }}
{{ $dir }}/{{ $file }} sha256:{{ $text | sha256sum }}
{{- end }}
{{- else }}
{{- range $path, $_ := $.Files.Glob (printf "files/%s/*.yaml" $dir) }}
{{ $dir }}/{{ base $path }} sha256:{{ $.Files.Get $path | sha256sum }}
{{- end }}
{{- end }}
{{- end }}
inventory/inventory.yaml sha256:{{ .Values.inventory | sha256sum }}
{{- end -}}

{{/*
The pod of a run: faultline with the experiments, their setup manifests and the inventory
mounted from ConfigMaps, reports on the PVC (or an emptyDir), POD_NAME and POD_NAMESPACE
from the downward API (a run refuses to fault the node its own pod runs on). The pod's exit
code is faultline's.

faultline is the pod's PID 1 (`faultline job`), which Kubernetes signals when the pod is
stopped (the Job deleted, `helm uninstall` or `upgrade`, activeDeadlineSeconds, a drain, an
eviction, preemption): it listens from its first moment, so no signal is lost; a signal
while it restores what an earlier run left lets the restore finish and runs nothing after
it, and one during the run cuts its step in flight and undoes within
terminationGracePeriodSeconds. It checks the mounted files against the release's pins
first, restores what the journal on the reports volume holds, chooses the baseline, runs,
and prints the summary and each JUnit file to the log.
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
      - name: FAULTLINE_COMPARE
        value: {{ .Values.job.compareWithPrevious | quote }}
      - name: FAULTLINE_COMPARE_ARGS
        value: {{ .Values.job.compareArgs | join " " | quote }}
      - name: FAULTLINE_REPORTS_EPHEMERAL
        value: {{ (not .Values.reports.persistence.enabled) | quote }}
      - name: FAULTLINE_PINNED
        value: {{ include "faultline.pins" . | trim | quote }}
      - name: FAULTLINE_OWN_ACCOUNTS
        value: {{ printf "%s-observer,%s-actor,%s-stop-runs" (include "faultline.name" .) (include "faultline.name" .) (include "faultline.name" .) | quote }}
    {{- if not (has .Values.job.command (list "run" "restore" "doctor" "plan" "validate")) }}
    {{- fail (printf "job.command must be run, restore, doctor, plan or validate, not %q" .Values.job.command) }}
    {{- end }}
    command: ["faultline", "job", {{ .Values.job.command | quote }}]
    {{- with .Values.job.extraArgs }}
    args:
      - "--"
      {{- range . }}
      - {{ . | quote }}
      {{- end }}
    {{- end }}
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
