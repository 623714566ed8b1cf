{{- /* Names. With the release `berth-operator` every name is the one deploy/install.yaml uses. */ -}}
{{- define "berth-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "berth-operator.labels" -}}
{{ include "berth-operator.selectorLabels" . }}
{{ include "berth-operator.releaseLabels" . }}
{{- end -}}

{{- /* Helm's own labels: all the CRD carries (as in deploy/crds). */ -}}
{{- define "berth-operator.releaseLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- /* The install's selector: the name label only (one operator per cluster; its webhooks are cluster-wide). */ -}}
{{- define "berth-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth-operator.name" . }}
{{- end -}}

{{- define "berth-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "berth-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "berth-operator.leaderElectionId" -}}
{{- .Values.leaderElection.id | default (printf "%s-leader" (include "berth-operator.fullname" .)) -}}
{{- end -}}

{{- define "berth-operator.webhookServiceName" -}}
{{- printf "%s-webhook" (include "berth-operator.fullname" .) -}}
{{- end -}}

{{- /* The webhook configurations and the ClusterRole that owns them (deleted with the release, it takes them along). */ -}}
{{- define "berth-operator.webhookConfigurationName" -}}
{{- printf "%s-injection-workloads" (include "berth-operator.fullname" .) -}}
{{- end -}}

{{- /* The injection webhook configurations and the ClusterRole that owns them (the Go chart's name). */ -}}
{{- define "berth-operator.injectionConfigurationName" -}}
{{- printf "%s-injection" (include "berth-operator.fullname" .) -}}
{{- end -}}

{{- /* The helpers run the operator's image unless injection.helper names another. */ -}}
{{- define "berth-operator.helperImage" -}}
{{- $h := .Values.injection.helper -}}
{{- printf "%s:%s" ($h.repository | default .Values.image.repository) ($h.tag | default .Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- /* The token broker: the operator's image unless sidecarBroker.image names another (always, for the Go one). */ -}}
{{- define "berth-operator.brokerImage" -}}
{{- $b := .Values.sidecarBroker.image -}}
{{- if eq .Values.sidecarBroker.implementation "go" -}}
{{- printf "%s:%s" $b.repository $b.tag -}}
{{- else -}}
{{- printf "%s:%s" ($b.repository | default .Values.image.repository) ($b.tag | default .Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "berth-operator.caSecretName" -}}
{{- printf "%s-webhook-ca" (include "berth-operator.fullname" .) -}}
{{- end -}}

{{- define "berth-operator.agentNamespace" -}}
{{- .Values.nodeTaintGuard.agentNamespace -}}
{{- end -}}

{{- /* selfsigned | cert-manager | existingSecret: the Go chart's injection.webhook.tls values select theirs. */ -}}
{{- define "berth-operator.certMode" -}}
{{- $tls := .Values.injection.webhook.tls -}}
{{- if $tls.existingSecret -}}existingSecret
{{- else if $tls.certManager.enabled -}}cert-manager
{{- else -}}{{ .Values.webhookCertificates.mode }}
{{- end -}}
{{- end -}}

{{- /* The Secret holding tls.crt and tls.key in the files modes. */ -}}
{{- define "berth-operator.servingSecretName" -}}
{{- .Values.injection.webhook.tls.existingSecret | default (printf "%s-webhook-tls" (include "berth-operator.fullname" .)) -}}
{{- end -}}

{{- /* The port of a bind address (":8080", "0.0.0.0:8080"). */ -}}
{{- define "berth-operator.port" -}}
{{- splitList ":" (toString .) | last | int -}}
{{- end -}}

{{- define "berth-operator.metricsEnabled" -}}
{{- if ne (include "berth-operator.port" .Values.metrics.bindAddress) "0" }}true{{ end -}}
{{- end -}}

{{- /* The metrics Service's port, named for its scheme. */ -}}
{{- define "berth-operator.metricsPortName" -}}
{{- ternary "https" "metrics" (.Values.metrics.secure | default false) -}}
{{- end -}}
