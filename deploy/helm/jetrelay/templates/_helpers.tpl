{{- define "jetrelay.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jetrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "jetrelay.labels" -}}
{{ include "jetrelay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "jetrelay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "jetrelay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "jetrelay.external" -}}
{{- if or .Values.nats.url .Values.nats.urlSecret.name -}}true{{- end -}}
{{- end -}}

{{/* Refuse the silent traps of docs/deployment.md at render time. */}}
{{- define "jetrelay.validate" -}}
{{- if and (not (include "jetrelay.external" .)) (or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled) -}}
{{- fail "replicaCount > 1 or autoscaling needs nats.url: without it every replica runs its own embedded JetStream, a separate queue holding the work its own bridge moved (docs/deployment.md)" -}}
{{- end -}}
{{- if and (not .Values.webhookSecret.allowPlaintext) (not .Values.webhookSecret.encryptionKeySecret.name) -}}
{{- fail "webhookSecret.encryptionKeySecret.name is required unless webhookSecret.allowPlaintext is true" -}}
{{- end -}}
{{- if not (has .Values.role (list "all" "bridge" "engine")) -}}
{{- fail "role must be all, bridge or engine" -}}
{{- end -}}
{{- if lt (int .Values.maxAckPending) (int .Values.workers) -}}
{{- fail "maxAckPending (JETRELAY_MAX_ACK_PENDING) must be at least workers (JETRELAY_WORKERS): the shared consumer would hand out fewer items than one replica's pool may send at once" -}}
{{- end -}}
{{- if not (has .Values.autoscaling.kind (list "keda" "hpa")) -}}
{{- fail "autoscaling.kind must be keda or hpa" -}}
{{- end -}}
{{- end -}}
