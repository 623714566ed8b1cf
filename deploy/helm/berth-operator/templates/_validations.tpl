{{- /* Values the chart refuses, each with a message naming the value (included by deployment.yaml). */ -}}
{{- define "berth-operator.validate" -}}
{{- $v := .Values -}}

{{- if not $v.berth.apiServer -}}
{{- fail "berth.apiServer is required: the URL of the central Berth lease API, e.g. https://berth.example.com:8443" -}}
{{- end -}}
{{- if not $v.clusterID -}}
{{- fail "clusterID is required: this cluster's holder identity, unique per cluster (clusters sharing one would all hold the same lease), e.g. clusterID: cluster-east" -}}
{{- end -}}

{{- if hasPrefix "ghcr.io/skaphos/berth-operator" $v.image.repository -}}
{{- fail (printf "image.repository=%s is the Go operator's image, which this chart cannot configure; set image.repository (and image.tag) to this project's image (docker build -t <registry>/berth-operator:%s .)" $v.image.repository .Chart.AppVersion) -}}
{{- end -}}

{{- if and $v.berth.tls.caBundleConfigMap $v.berth.tls.caBundleSecret -}}
{{- fail "set at most one of berth.tls.caBundleConfigMap and berth.tls.caBundleSecret: each is the central API's CA bundle" -}}
{{- end -}}

{{- if and (gt (int $v.replicaCount) 1) (not $v.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 requires leaderElection.enabled=true: without it every replica would run the controllers" -}}
{{- end -}}

{{- $tokens := list -}}
{{- if $v.berth.apiKey.secretName }}{{ $tokens = append $tokens "berth.apiKey.secretName" }}{{ end -}}
{{- if $v.berth.tokenFile.path }}{{ $tokens = append $tokens "berth.tokenFile.path" }}{{ end -}}
{{- if $v.sidecarBroker.enabled }}{{ $tokens = append $tokens "sidecarBroker.enabled" }}{{ end -}}
{{- if gt (len $tokens) 1 -}}
{{- fail (printf "configure at most one of berth.apiKey.secretName, berth.tokenFile.path and sidecarBroker.enabled (set: %s): each supplies the operator's bearer token" (join ", " $tokens)) -}}
{{- end -}}
{{- if $v.sidecarBroker.enabled -}}
{{- $o := $v.sidecarBroker.oidc -}}
{{- if or (not (or $o.issuerURL $o.tokenURL)) (not $o.clientID) (not $o.clientSecret.secretName) -}}
{{- fail "sidecarBroker.enabled=true requires sidecarBroker.oidc.issuerURL (or tokenURL), sidecarBroker.oidc.clientID and sidecarBroker.oidc.clientSecret.secretName" -}}
{{- end -}}
{{- $img := $v.sidecarBroker.image -}}
{{- if eq $v.sidecarBroker.implementation "go" -}}
{{- if or (not $img.repository) (not $img.tag) -}}
{{- fail "sidecarBroker.implementation=go requires sidecarBroker.image.repository and sidecarBroker.image.tag: the Go project's berth-oidc-broker image (e.g. ghcr.io/skaphos/berth-oidc-broker), whose version is not this chart's appVersion" -}}
{{- end -}}
{{- else if hasPrefix "ghcr.io/skaphos/berth-oidc-broker" $img.repository -}}
{{- fail (printf "sidecarBroker.image.repository=%s is the Go project's broker image, which cannot run `berth-operator oidc-broker`: set sidecarBroker.implementation=go to run it, or leave the repository empty for this operator's broker" $img.repository) -}}
{{- end -}}
{{- end -}}

{{- with $v.injection -}}
{{- if hasPrefix "ghcr.io/skaphos/berth-acquire" .helper.repository -}}
{{- fail (printf "injection.helper.repository=%s is the Go helper's image, which cannot run this operator's helpers (`berth-operator helper ...`); leave it empty for image.repository" .helper.repository) -}}
{{- end -}}
{{- if ne (int .webhook.timeoutSeconds) 10 -}}
{{- fail (printf "injection.webhook.timeoutSeconds=%v is not supported: the operator registers the injection webhooks with 10" .webhook.timeoutSeconds) -}}
{{- end -}}
{{- if not (deepEqual .webhook.objectSelector (dict "matchLabels" (dict "berth.skaphos.io/inject" "acquire"))) -}}
{{- fail "injection.webhook.objectSelector is not supported other than matchLabels berth.skaphos.io/inject: acquire: the operator registers the injection webhooks for exactly the opt-in label" -}}
{{- end -}}
{{- if .webhook.namespaceSelector -}}
{{- fail "injection.webhook.namespaceSelector is not supported: the operator registers the injection webhooks for every namespace but injection.controlPlaneNamespaces (and the release namespace)" -}}
{{- end -}}
{{- range $pair := list (list "apiKeyFile" .helper.apiKeyFile "apiKeySecret.name" .helper.apiKeySecret.name) (list "caBundleFile" .helper.caBundleFile "caBundleConfigMap.name" .helper.caBundleConfigMap.name) -}}
{{- if ne (empty (index $pair 1)) (empty (index $pair 3)) -}}
{{- fail (printf "injection.helper.%s and injection.helper.%s must be set together: the webhook mounts the source at the file's directory" (index $pair 0) (index $pair 2)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- range $key := list "berthLeaseVerbs" "targetVerbs" -}}
{{- if get $v.rbac $key -}}
{{- fail (printf "rbac.%s is not supported: the chart grants exactly the rules the operator uses (generated from its code); grant anything more with a ClusterRole of your own" $key) -}}
{{- end -}}
{{- end -}}

{{- $metricsOff := not (include "berth-operator.metricsEnabled" .) -}}
{{- if and $metricsOff $v.metrics.serviceMonitor.enabled -}}
{{- fail (printf "metrics.serviceMonitor.enabled=true but metrics.bindAddress=%q disables the metrics listener" (toString $v.metrics.bindAddress)) -}}
{{- end -}}
{{- if and $metricsOff $v.metrics.secure -}}
{{- fail (printf "metrics.secure=true but metrics.bindAddress=%q disables the metrics listener" (toString $v.metrics.bindAddress)) -}}
{{- end -}}
{{- if eq (include "berth-operator.port" $v.healthProbe.bindAddress) "0" -}}
{{- fail (printf "healthProbe.bindAddress=%q disables /healthz and /readyz, which the Deployment's probes need" (toString $v.healthProbe.bindAddress)) -}}
{{- end -}}

{{- if or $v.workloadManagement.enabled $v.injection.enabled -}}
{{- $tls := $v.injection.webhook.tls -}}
{{- $mode := $v.webhookCertificates.mode -}}
{{- if and $tls.certManager.enabled $tls.existingSecret -}}
{{- fail "injection.webhook.tls.certManager.enabled and injection.webhook.tls.existingSecret are exclusive: pick one source of the webhook serving certificate" -}}
{{- end -}}
{{- $effective := include "berth-operator.certMode" . -}}
{{- if and (ne $mode "selfsigned") (ne $mode $effective) -}}
{{- fail (printf "webhookCertificates.mode=%s contradicts injection.webhook.tls, which selects %s" $mode $effective) -}}
{{- end -}}
{{- if and (eq $mode "existingSecret") (not $tls.existingSecret) -}}
{{- fail "webhookCertificates.mode=existingSecret requires injection.webhook.tls.existingSecret, the name of a kubernetes.io/tls Secret in the release namespace" -}}
{{- end -}}
{{- if $tls.caBundle -}}
{{- if not (has $effective (list "cert-manager" "existingSecret")) -}}
{{- fail "injection.webhook.tls.caBundle is only used with the cert-manager or existingSecret certificates: the self-signed CA is the operator's" -}}
{{- end -}}
{{- if not (hasPrefix "-----BEGIN CERTIFICATE-----" (b64dec $tls.caBundle | trim)) -}}
{{- fail "injection.webhook.tls.caBundle must be base64 of PEM certificates (base64 -w0 ca.crt)" -}}
{{- end -}}
{{- end -}}
{{- if ne (int $v.injection.webhook.servicePort) 443 -}}
{{- fail (printf "injection.webhook.servicePort=%v is not supported: the operator registers its webhooks on port 443 of the webhook Service" $v.injection.webhook.servicePort) -}}
{{- end -}}
{{- end -}}

{{- end -}}
