#!/usr/bin/env bash
# Parquet files from two real writers, for tests/data/test_parquet.cpp and bench/bench_sources.cpp
# (scripts/parquet_write.mjs says which files): the Rust `parquet` crate compiled to WebAssembly
# (npm parquet-wasm, with apache-arrow) and hyparquet-writer.
#
#   scripts/parquet_write.sh fetch
#       Installs parquet-wasm@0.8.0, apache-arrow@21.2.0 and hyparquet-writer@0.17.0 with npm
#       into ${MARIN_CACHE:-$HOME/.cache/marin}/npm-parquet (outside the repository; idempotent).
#       Exits non-zero with the reason when node, npm or the registry is unavailable.
#   scripts/parquet_write.sh write IN.jsonl OUTDIR [bench|task|cols]
#       Writes OUTDIR/*.parquet from the {"text": ...} lines of IN.jsonl, and OUTDIR/files.txt
#       (task: task.parquet with string columns only and task-int.parquet with an INT32 too;
#       cols: fixed rows with integer, boolean, float, list and struct columns from both writers,
#       and expected.jsonl, their JSON).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${MARIN_CACHE:-$HOME/.cache/marin}/npm-parquet"

source "$here/npm_fetch.sh"
fetch() { npm_fetch "$cache" parquet-wasm@0.8.0 apache-arrow@21.2.0 hyparquet-writer@0.17.0; }

case "${1:-}" in
  fetch) fetch ;;
  write)
    [[ $# -eq 3 || $# -eq 4 ]] || { echo "usage: $0 write IN.jsonl OUTDIR [bench|task|cols]" >&2; exit 2; }
    fetch
    node "$here/parquet_write.mjs" "$cache" "$2" "$3" "${4:-}"
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
