#!/usr/bin/env bash
# Build ferry, start the local stack and run the demo against it.
# Extra arguments are passed to `ferry demo`.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

make build
bash deploy/stack.sh up
# shellcheck source=/dev/null
. .stack/env
exec bin/ferry demo "$@"
