#!/usr/bin/env bash
# Runs every Rollcall test: unit, property, store contract suite on SQLite
# and PostgreSQL, MCP adapter, REST, CLI and the end-to-end tests (real
# binary, official MCP TypeScript SDK client, Go MCP client, the generated
# TypeScript REST client of clients/typescript), all under the
# race detector, and the fault suite (e2e/fault: two servers on a throwaway
# PostgreSQL cluster it starts itself from /usr/lib/postgresql/*/bin).
#
# PostgreSQL: uses $ROLLCALL_TEST_POSTGRES if set, else 127.0.0.1:5432 if it
# answers, else starts a throwaway cluster from Debian's binaries
# (/usr/lib/postgresql/*/bin) in a temp dir and removes it on exit.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestE2E).
set -euo pipefail
cd "$(dirname "$0")/.."

pg_up() { # host port
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$1" -p "$2" -t 2
  else
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
  fi
}

if [ -z "${ROLLCALL_TEST_POSTGRES:-}" ]; then
  if pg_up 127.0.0.1 5432; then
    export ROLLCALL_TEST_POSTGRES="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
  else
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
      echo "test.sh: no PostgreSQL at 127.0.0.1:5432 and no Debian PostgreSQL binaries; install postgresql" >&2
      exit 1
    fi
    tmp=$(mktemp -d /tmp/rollcall-pg.XXXXXX)
    port=55432
    as_pg=()
    if [ "$(id -u)" = 0 ]; then chown postgres "$tmp"; as_pg=(runuser -u postgres --); fi
    echo "test.sh: starting a throwaway PostgreSQL in $tmp on port $port"
    "${as_pg[@]}" "$bin/initdb" -A trust -U postgres -D "$tmp/data" >"$tmp/initdb.log" 2>&1
    "${as_pg[@]}" "$bin/pg_ctl" -D "$tmp/data" -l "$tmp/pg.log" -w -o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
    trap '"${as_pg[@]}" "$bin/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1; rm -rf "$tmp"' EXIT
    export ROLLCALL_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  fi
fi
# The PostgreSQL suites must run, never skip.
export ROLLCALL_REQUIRE_POSTGRES=1

# The official MCP TypeScript SDK client used by the end-to-end test.
if [ ! -d e2e/tsclient/node_modules/@modelcontextprotocol/sdk ]; then
  (cd e2e/tsclient && npm ci --no-audit --no-fund --loglevel=error)
fi

# The public TypeScript REST client (clients/typescript) and its test tools,
# for TestE2ETypeScriptRESTClient. Its src/gen is generated from
# api/openapi.yaml, never committed: npm ci generates it (prepare), and it is
# regenerated here so it always matches the document under test.
if [ ! -d clients/typescript/node_modules/tsx ]; then
  (cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error)
fi
(cd clients/typescript && npm run --silent generate >/dev/null)

# The real Claude Code binary, pinned in e2e/claudecode/package-lock.json, for
# the end-to-end tests of e2e/claudecode_e2e_test.go.
if [ ! -x e2e/claudecode/node_modules/.bin/claude ]; then
  (cd e2e/claudecode && npm ci --no-audit --no-fund --loglevel=error)
fi

# -json through tools/testsummary: the output of plain `go test` (package
# lines, failing tests in full), then "N passed, N failed, N skipped" as the
# last line. pipefail keeps go test's exit status.
go build -o "${TMPDIR:-/tmp}/rollcall-testsummary.$$" ./tools/testsummary
summary="${TMPDIR:-/tmp}/rollcall-testsummary.$$"
status=0
go test -race -count=1 -timeout 30m -json "$@" ./... | "$summary" || status=$?
rm -f "$summary"
exit $status
