{{- /* Values the chart refuses, each with a message naming the value (included by deployment.yaml). */ -}}
{{- define "berth-apiserver.validate" -}}
{{- $v := .Values -}}
{{- $backend := include "berth-apiserver.storeBackend" . -}}
{{- $replicas := int $v.replicaCount -}}

{{- if regexMatch "(^|/)berth-apiserver(:|@|$)" $v.image.repository -}}
{{- fail (printf "image.repository=%s is the Go server's image, which has no `central` subcommand; set image.repository (and image.tag) to this project's image (docker build -t <registry>/berth-operator:%s .)" $v.image.repository .Chart.AppVersion) -}}
{{- end -}}

{{- /* TLS: required, from exactly one source. */ -}}
{{- $cm := $v.tls.certManager -}}
{{- if and $cm.enabled $v.tls.existingSecret -}}
{{- fail "tls.certManager.enabled and tls.existingSecret are exclusive: pick one source of the serving certificate" -}}
{{- end -}}
{{- if not (or $cm.enabled $v.tls.existingSecret) -}}
{{- fail "TLS is required (the lease API is served over HTTPS only): set tls.existingSecret to a kubernetes.io/tls Secret of the release namespace, or tls.certManager.enabled=true with tls.certManager.issuerRef" -}}
{{- end -}}
{{- if and $cm.enabled (not $cm.issuerRef.name) -}}
{{- fail "tls.certManager.enabled=true requires tls.certManager.issuerRef.name (and kind: Issuer or ClusterIssuer)" -}}
{{- end -}}

{{- /* Authentication: required unless auth.mode says none. */ -}}
{{- $a := $v.auth -}}
{{- if not $a.mode -}}
{{- fail "auth.mode is required: static-keys (with auth.staticKeys.secretName) or oidc (with auth.oidc.issuerURL and auth.oidc.audience); to serve leases to anyone who can reach the Service, set auth.mode=none explicitly" -}}
{{- end -}}
{{- if and (eq $a.mode "static-keys") (not $a.staticKeys.secretName) -}}
{{- fail "auth.mode=static-keys requires auth.staticKeys.secretName: a Secret of the release namespace whose key auth.staticKeys.secretKey holds `<key-id>:<sha256-hex>` lines" -}}
{{- end -}}
{{- if and (eq $a.mode "oidc") (or (not $a.oidc.issuerURL) (not $a.oidc.audience)) -}}
{{- fail "auth.mode=oidc requires auth.oidc.issuerURL and auth.oidc.audience" -}}
{{- end -}}

{{- /* Replicas need a store they share. */ -}}
{{- if and (gt $replicas 1) (include "berth-apiserver.singleReplicaStore" .) -}}
{{- if eq $backend "mem" -}}
{{- fail (printf "replicaCount=%d needs a durable store the replicas share, but the store is mem%s (each replica would grant the same lease): set store.backend=k8s (with coordination.namespace) or store.backend=sql with store.sql.driver postgres or mysql, or replicaCount=1" $replicas (ternary "" " (store.backend is empty and coordination.namespace is empty)" (not (empty $v.store.backend)))) -}}
{{- else -}}
{{- fail (printf "replicaCount=%d with store.sql.driver=sqlite: SQLite serves one replica (the first takes the file's lock); use store.sql.driver postgres or mysql, or replicaCount=1" $replicas) -}}
{{- end -}}
{{- end -}}

{{- /* The Kubernetes store. */ -}}
{{- $c := $v.coordination -}}
{{- if eq $backend "k8s" -}}
{{- if not $c.namespace -}}
{{- fail "store.backend=k8s requires coordination.namespace, the namespace of the Lease objects" -}}
{{- end -}}
{{- if and $c.inCluster $c.kubeconfig.secretName -}}
{{- fail "coordination.inCluster=true and coordination.kubeconfig.secretName are exclusive: the Leases are in this cluster or in the kubeconfig's" -}}
{{- end -}}
{{- if not (or $c.inCluster $c.kubeconfig.secretName) -}}
{{- fail "store.backend=k8s requires coordination.inCluster=true (the Leases are in this cluster) or coordination.kubeconfig.secretName (a Secret with the kubeconfig of the cluster holding them)" -}}
{{- end -}}
{{- if and $c.kubeconfig.secretName (not $c.kubeconfig.secretKey) -}}
{{- fail "coordination.kubeconfig.secretKey is required with coordination.kubeconfig.secretName" -}}
{{- end -}}
{{- else if or $c.namespace $c.inCluster $c.kubeconfig.secretName -}}
{{- fail (printf "store.backend=%s does not use coordination.namespace, coordination.inCluster or coordination.kubeconfig.secretName: remove them" $backend) -}}
{{- end -}}

{{- /* The SQL store. */ -}}
{{- $sql := $v.store.sql -}}
{{- if eq $backend "sql" -}}
{{- if not $sql.driver -}}
{{- fail "store.backend=sql requires store.sql.driver: postgres, mysql or sqlite" -}}
{{- end -}}
{{- if and $sql.dsn $sql.dsnSecret.name -}}
{{- fail "store.sql.dsn and store.sql.dsnSecret.name are exclusive" -}}
{{- end -}}
{{- if and $sql.dsn (ne $sql.driver "sqlite") -}}
{{- fail (printf "store.sql.dsn is not supported with store.sql.driver=%s: the connection string holds the database password, which would be in the Deployment; put it in a Secret and set store.sql.dsnSecret.name" $sql.driver) -}}
{{- end -}}
{{- if not (or $sql.dsn $sql.dsnSecret.name) -}}
{{- fail "store.backend=sql requires store.sql.dsnSecret.name (a Secret holding the connection string; sqlite may give its file as store.sql.dsn)" -}}
{{- end -}}
{{- if and $sql.dsnSecret.name (not $sql.dsnSecret.key) -}}
{{- fail "store.sql.dsnSecret.key is required with store.sql.dsnSecret.name" -}}
{{- end -}}
{{- else if or $sql.driver $sql.dsn $sql.dsnSecret.name -}}
{{- fail (printf "store.backend=%s does not use store.sql.driver, store.sql.dsn or store.sql.dsnSecret.name: set store.backend=sql or remove them" $backend) -}}
{{- end -}}
{{- if and $sql.sqlite.existingClaim (not (and (eq $backend "sql") (eq $sql.driver "sqlite"))) -}}
{{- fail "store.sql.sqlite.existingClaim is only used with store.backend=sql and store.sql.driver=sqlite" -}}
{{- end -}}

{{- /* Metrics. */ -}}
{{- $m := $v.metrics -}}
{{- if and $m.serviceMonitor.enabled (not (and $m.enabled $m.service.enabled)) -}}
{{- fail "metrics.serviceMonitor.enabled=true requires metrics.enabled=true and metrics.service.enabled=true: the ServiceMonitor scrapes the metrics Service" -}}
{{- end -}}
{{- if and $m.podAnnotations.enabled (not $m.enabled) -}}
{{- fail "metrics.podAnnotations.enabled=true requires metrics.enabled=true" -}}
{{- end -}}
{{- if and $m.enabled (eq (int $m.port) 8443) -}}
{{- fail "metrics.port=8443 is the lease API's container port: pick another" -}}
{{- end -}}

{{- end -}}
