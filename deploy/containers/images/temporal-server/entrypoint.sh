#!/bin/sh
# Writes the server's config from the environment (every service in this one process, PostgreSQL persistence and
# SQL visibility, as stack/temporal-server.ts configures the cluster's) and starts it.
set -eu
: "${DB:=postgres12}" "${DB_PORT:=5432}" "${POSTGRES_SEEDS:?}" "${POSTGRES_USER:?}" "${POSTGRES_PWD:?}"
: "${DBNAME:=temporal}" "${VISIBILITY_DBNAME:=temporal_visibility}" "${NUM_HISTORY_SHARDS:=4}"
: "${BIND_ON_IP:=0.0.0.0}" "${TEMPORAL_BROADCAST_ADDRESS:=$(hostname -i | cut -d' ' -f1)}"
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"; }
cfg=/etc/temporal/config/docker.yaml
umask 077
cat >/etc/temporal/config/dynamicconfig.yaml <<YAML
system.forceSearchAttributesCacheRefreshOnRead: [{ value: true }]
system.enableEagerWorkflowStart: [{ value: true }]
YAML
store() {
  cat <<YAML
    $1:
      sql:
        pluginName: $DB
        databaseName: $2
        connectAddr: '$POSTGRES_SEEDS:$DB_PORT'
        connectProtocol: tcp
        user: $(q "$POSTGRES_USER")
        password: $(q "$POSTGRES_PWD")
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
YAML
}
service() {
  cat <<YAML
  $1:
    rpc:
      grpcPort: $2
      membershipPort: $3
      bindOnIP: $BIND_ON_IP
YAML
}
{
  cat <<YAML
log: { stdout: true, level: ${LOG_LEVEL:-warn} }
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: $NUM_HISTORY_SHARDS
  datastores:
YAML
  store default "$DBNAME"
  store visibility "$VISIBILITY_DBNAME"
  cat <<YAML
global:
  membership: { maxJoinDuration: 30s, broadcastAddress: '$TEMPORAL_BROADCAST_ADDRESS' }
services:
YAML
  service frontend 7233 6933
  service history 7234 6934
  service matching 7235 6935
  service worker 7239 6939
  cat <<YAML
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active: { enabled: true, initialFailoverVersion: 1, rpcName: frontend, rpcAddress: '127.0.0.1:7233' }
dcRedirectionPolicy: { policy: noop }
dynamicConfigClient: { filepath: /etc/temporal/config/dynamicconfig.yaml, pollInterval: 10s }
YAML
} >"$cfg"
exec temporal-server --config-file "$cfg" --allow-no-auth start
