#!/usr/bin/env bash
# The kernel seam (issue 12, docs/kernels.md): the model, the optimizer and the sampler do no
# math of their own; every loop over tensor data lives in src/kernels/. This check fails, naming
# file:line, on
#   1. any `#pragma omp` in the checked files (threading belongs to the kernels), and
#   2. any math loop: a `for` statement whose body — the rest of its line, or the block that
#      follows up to its closing brace — updates a value with `+=`, `-=`, `*=` or `/=`, or calls
#      exp, log, sqrt, pow or sigmoid.
# A loop that is bookkeeping (integer counts, offsets, planner arithmetic over a handful of
# scalars) may stay where it is with a marker comment on the `for` line or the line above it:
#   // seam: <why this is not tensor math>
# The reason is required; a bare marker does not count.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Arguments: other files to check instead (the test of the check itself, tests/checks/kernel_seam_violations.cpp.txt).
if [ "$#" -gt 0 ]; then
  files="$*"
else
  files=$(find src/model src/optim -name '*.cpp' -o -name '*.hpp' | sort; echo src/eval/sampler.cpp)
fi
status=0
for f in $files; do
  awk -v file="$f" '
    function report(line, what) { printf "%s:%d: %s\n", file, line, what; bad = 1 }
    function marked(n) { return (text[n] ~ /\/\/ seam: [^ ]/) || (n > 1 && text[n-1] ~ /\/\/ seam: [^ ]/) }
    { text[NR] = $0 }
    END {
      for (n = 1; n <= NR; n++) {
        line = text[n]
        sub(/\/\/.*/, "", line)  # comments do not count
        if (line ~ /#pragma omp/) report(n, "#pragma omp outside src/kernels/")
        if (line !~ /(^|[^a-zA-Z_])for \(/) continue
        # The loop body: this line after the header, then following lines while braces are open.
        body = line; depth = 0; m = n
        tmp = line; opens = gsub(/\{/, "{", tmp); closes = gsub(/\}/, "}", tmp)
        depth = opens - closes
        if (depth == 0 && line !~ /;[ \t]*$/ && line !~ /\}[ \t]*$/) {  # single statement on the next line
          m = n + 1; body = body "\n" text[m]
        }
        while (depth > 0 && m < NR) {
          m++; l2 = text[m]; sub(/\/\/.*/, "", l2); body = body "\n" l2
          tmp = l2; depth += gsub(/\{/, "{", tmp); tmp = l2; depth -= gsub(/\}/, "}", tmp)
        }
        if (body ~ /(\+=|-=|\*=|\/=)/ || body ~ /(^|[^a-zA-Z_])(std::)?(exp|log|sqrt|pow|sigmoid)\(/) {
          if (!marked(n)) report(n, "math loop outside src/kernels/ (move it behind kernels/, or mark a bookkeeping loop with // seam: <reason>)")
        }
      }
      exit bad
    }' "$f" || status=1
done
if [ "$status" -ne 0 ]; then
  echo "check_kernel_seam: FAILED (see docs/kernels.md, \"The kernel seam\")" >&2
else
  echo "check_kernel_seam: OK"
fi
exit "$status"
