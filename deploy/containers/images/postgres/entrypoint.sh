#!/bin/sh
# First start: initdb with the password from POSTGRES_PASSWORD(_FILE), scram for TCP, the database POSTGRES_DB.
# The init server listens on a private socket only, so pg_isready (the health check) fails until the real start.
set -eu
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then POSTGRES_PASSWORD="$(cat "$POSTGRES_PASSWORD_FILE")"; fi
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
  initdb --username="$POSTGRES_USER" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  rm -f "$pw"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
  init="$(mktemp -d)"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=$init" -w start >/dev/null
  [ "$POSTGRES_DB" = postgres ] || createdb -h "$init" -U "$POSTGRES_USER" "$POSTGRES_DB"
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "initialized $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
fi
exec "$@"
