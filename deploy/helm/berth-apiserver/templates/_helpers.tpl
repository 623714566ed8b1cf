{{- /* Names. With the release `berth-apiserver` every name is the one deploy/install-apiserver.yaml uses. */ -}}
{{- define "berth-apiserver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth-apiserver.fullname" -}}
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

{{- define "berth-apiserver.labels" -}}
{{ include "berth-apiserver.selectorLabels" . }}
app.kubernetes.io/part-of: berth
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- /* Name and instance: several releases may share a namespace. */ -}}
{{- define "berth-apiserver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth-apiserver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "berth-apiserver.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "berth-apiserver.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* The Secret holding tls.crt and tls.key: an existing one, or the cert-manager Certificate's. */ -}}
{{- define "berth-apiserver.tlsSecretName" -}}
{{- .Values.tls.existingSecret | default (printf "%s-tls" (include "berth-apiserver.fullname" .)) -}}
{{- end -}}

{{- /* mem | k8s | sql: store.backend, or the Go chart's rule when it is empty. */ -}}
{{- define "berth-apiserver.storeBackend" -}}
{{- if .Values.store.backend -}}{{ .Values.store.backend }}
{{- else if .Values.coordination.namespace -}}k8s
{{- else -}}mem
{{- end -}}
{{- end -}}

{{- /* "true" when one replica is all the store can serve (mem, sqlite). */ -}}
{{- define "berth-apiserver.singleReplicaStore" -}}
{{- $backend := include "berth-apiserver.storeBackend" . -}}
{{- if or (eq $backend "mem") (and (eq $backend "sql") (eq .Values.store.sql.driver "sqlite")) }}true{{ end -}}
{{- end -}}

{{- /* The in-cluster Kubernetes store: the ServiceAccount's token and the Lease Role. */ -}}
{{- define "berth-apiserver.inClusterLeases" -}}
{{- if and (eq (include "berth-apiserver.storeBackend" .) "k8s") .Values.coordination.inCluster }}true{{ end -}}
{{- end -}}
