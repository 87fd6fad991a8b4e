{{/* Names and labels. */}}
{{- define "dify-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dify-agent.fullname" -}}
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

{{- define "dify-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "dify-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "api"). */}}
{{- define "dify-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dify-agent.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dify-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "dify-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dify-agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dify-agent.apiUrl" -}}
{{- printf "http://%s-api:%v" (include "dify-agent.fullname" .) .Values.api.service.port -}}
{{- end -}}

{{- define "dify-agent.backendUrl" -}}
{{- printf "http://%s-agent-backend:%v" (include "dify-agent.fullname" .) .Values.agentBackend.service.port -}}
{{- end -}}

{{- define "dify-agent.claimName" -}}
{{- default (printf "%s-data" (include "dify-agent.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}

{{/* Where the Secret's keys appear as files (read through <NAME>_FILE, docs/configuration.md). */}}
{{- define "dify-agent.secretsDir" -}}/run/secrets/dify-agent{{- end -}}

{{/* DATABASE_URL without its password (DATABASE_PASSWORD_FILE holds that). */}}
{{- define "dify-agent.databaseUrl" -}}
{{- $pg := .Values.postgresql -}}
{{- $q := printf "sslmode=%s" $pg.sslmode -}}
{{- if $pg.ca.secretName -}}{{- $q = printf "%s&sslrootcert=/run/secrets/postgresql-ca/%s" $q $pg.ca.key -}}{{- end -}}
{{- printf "postgresql://%s@%s:%v/%s?%s" (urlquery $pg.user) $pg.host $pg.port (urlquery $pg.database) $q -}}
{{- end -}}

{{/* The environment every app container shares: config, secrets as files, the other services' addresses. */}}
{{- define "dify-agent.env" -}}
{{- $dir := include "dify-agent.secretsDir" . -}}
- name: NODE_ENV
  value: production
{{- if .Values.postgresql.urlKey }}
- name: DATABASE_URL_FILE
  value: {{ printf "%s/%s" $dir .Values.postgresql.urlKey | quote }}
{{- else }}
- name: DATABASE_URL
  value: {{ include "dify-agent.databaseUrl" . | quote }}
- name: DATABASE_PASSWORD_FILE
  value: {{ printf "%s/%s" $dir .Values.postgresql.passwordKey | quote }}
{{- end }}
- name: INNER_API_KEY_FILE
  value: {{ $dir }}/inner_api_key
- name: AGENT_BACKEND_TOKEN_FILE
  value: {{ $dir }}/agent_backend_token
- name: EXECUTION_CONTEXT_SIGNING_KEY_FILE
  value: {{ $dir }}/execution_context_signing_key
- name: ENCRYPTION_KEY_FILE
  value: {{ $dir }}/encryption_key
- name: SHELLCTL_AUTH_TOKEN_FILE
  value: {{ $dir }}/shellctl_auth_token
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: TEMPORAL_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
{{- with .Values.temporal.tls }}
{{- if .enabled }}
- name: TEMPORAL_TLS
  value: "true"
{{- end }}
{{- if .serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- if .ca }}
- name: TEMPORAL_TLS_CA_FILE
  value: /run/secrets/temporal-tls/ca.crt
{{- end }}
{{- if .mtls }}
- name: TEMPORAL_TLS_CERT_FILE
  value: /run/secrets/temporal-tls/tls.crt
- name: TEMPORAL_TLS_KEY_FILE
  value: /run/secrets/temporal-tls/tls.key
{{- end }}
{{- end }}
{{- if .Values.temporal.apiKeyKey }}
- name: TEMPORAL_API_KEY_FILE
  value: {{ printf "%s/%s" $dir .Values.temporal.apiKeyKey | quote }}
{{- end }}
- name: AGENT_BACKEND_URL
  value: {{ include "dify-agent.backendUrl" . | quote }}
- name: DATA_DIR
  value: /data
- name: WORKSPACES_DIR
  value: /data/workspaces
{{- with .Values.objectStorage }}
{{- if .enabled }}
{{- /* WORKSPACE_STORE=s3 (docs/workspace.md "Workspaces on object storage"; the names core/platform/config.ts reads). */}}
- name: WORKSPACE_STORE
  value: s3
- name: S3_BUCKET
  value: {{ .bucket | quote }}
- name: S3_PREFIX
  value: {{ .prefix | quote }}
{{- with .endpoint }}
- name: S3_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .region }}
- name: S3_REGION
  value: {{ . | quote }}
{{- end }}
- name: S3_FORCE_PATH_STYLE
  value: {{ .forcePathStyle | quote }}
- name: S3_ACCESS_KEY_ID_FILE
  value: /run/secrets/object-storage/{{ .credentials.accessKeyIdKey }}
- name: S3_SECRET_ACCESS_KEY_FILE
  value: /run/secrets/object-storage/{{ .credentials.secretAccessKeyKey }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Volumes every app pod mounts: the Secret's files, the data volume, a writable /tmp, TLS material. */}}
{{- define "dify-agent.volumes" -}}
{{ include "dify-agent.secretVolumes" . }}
- name: data
  persistentVolumeClaim:
    claimName: {{ include "dify-agent.claimName" . }}
{{- end -}}

{{/*
The agent backend's volumes. With object storage its /data is the pod's own (an emptyDir: its local copies of the
workspaces it runs, restored from the bucket when a run enters one and saved back when the run ends, and the shellctl
token file); no volume is shared with any other pod. Without it, the shared claim like the api and the worker.
*/}}
{{- define "dify-agent.backendVolumes" -}}
{{- if .Values.objectStorage.enabled -}}
{{ include "dify-agent.secretVolumes" . }}
- name: data
  emptyDir:
    {{- with .Values.agentBackend.localData.sizeLimit }}
    sizeLimit: {{ . }}
    {{- else }} {}
    {{- end }}
{{- else -}}
{{ include "dify-agent.volumes" . }}
{{- end -}}
{{- end -}}

{{/* The same without the data volume (the migration hook runs before the release's claim exists). */}}
{{- define "dify-agent.secretVolumes" -}}
- name: secrets
  secret:
    secretName: {{ .Values.secrets.existingSecret }}
    defaultMode: 0440
- name: tmp
  emptyDir: {}
{{- if .Values.postgresql.ca.secretName }}
- name: postgresql-ca
  secret:
    secretName: {{ .Values.postgresql.ca.secretName }}
    defaultMode: 0440
{{- end }}
{{- if and .Values.temporal.tls.secretName (or .Values.temporal.tls.ca .Values.temporal.tls.mtls) }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- if .Values.objectStorage.enabled }}
- name: object-storage
  secret:
    secretName: {{ .Values.objectStorage.credentials.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "dify-agent.volumeMounts" -}}
{{ include "dify-agent.secretVolumeMounts" . }}
- name: data
  mountPath: /data
{{- end -}}

{{- define "dify-agent.secretVolumeMounts" -}}
- name: secrets
  mountPath: {{ include "dify-agent.secretsDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.postgresql.ca.secretName }}
- name: postgresql-ca
  mountPath: /run/secrets/postgresql-ca
  readOnly: true
{{- end }}
{{- if and .Values.temporal.tls.secretName (or .Values.temporal.tls.ca .Values.temporal.tls.mtls) }}
- name: temporal-tls
  mountPath: /run/secrets/temporal-tls
  readOnly: true
{{- end }}
{{- if .Values.objectStorage.enabled }}
- name: object-storage
  mountPath: /run/secrets/object-storage
  readOnly: true
{{- end }}
{{- end -}}

{{/* Prometheus scrape annotations: (dict "root" $ "port" 5001). */}}
{{- define "dify-agent.podAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* The turn search attributes as Name=Type (core/protocol/workflow-contract.ts TURN_SEARCH_ATTRIBUTE_SPECS). */}}
{{- define "dify-agent.searchAttributes" -}}
TenantId=Keyword AppId=Keyword AgentId=Keyword ConversationId=Keyword MessageId=Keyword InvokeFrom=Keyword MessageIds=KeywordList TurnStatus=Keyword ErrorCode=Keyword
{{- end -}}
