#!/bin/sh
set -eu
: "${TEMPORAL_ADDRESS:=temporal:7233}" "${TEMPORAL_UI_PORT:=8080}" "${TEMPORAL_DEFAULT_NAMESPACE:=default}"
cat >/home/temporal/config/docker.yaml <<YAML
temporalGrpcAddress: '$TEMPORAL_ADDRESS'
host: 0.0.0.0
port: $TEMPORAL_UI_PORT
enableUi: true
defaultNamespace: '$TEMPORAL_DEFAULT_NAMESPACE'
cors: { cookieInsecure: true }
YAML
exec ui-server --root /home/temporal --config config --env docker start
