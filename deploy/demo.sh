#!/usr/bin/env bash
# Build ferry, start the local stack and run the demo against it.
# Extra arguments are passed to `ferry demo`. FOLLOW=1 (make demo FOLLOW=1)
# adds --follow: the writes and ferry keep running, printing the lag every
# 2 s, until Ctrl-C.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

make build
bash deploy/stack.sh up
# shellcheck source=/dev/null
. .stack/env
case "${FOLLOW:-}" in
"" | 0 | no | false) ;;
*) set -- --follow "$@" ;;
esac
exec bin/ferry demo "$@"
