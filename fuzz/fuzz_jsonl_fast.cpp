// The JSONL reader's fast path (data/sources/jsonl_fast.hpp) against the rule it accelerates: on
// every input line it declines, or it decides as jsonl_text and jsonl_id do under the JSON policy
// (a difference aborts). The first byte picks the text field ("text" or "meta.body").
#include <cstdio>
#include <cstdlib>

#include "data/sources/jsonl_fast.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static marin::data::JsonlFastPath fast;
  static const std::vector<std::string> text = {"text"}, nested = {"meta", "body"}, id = {"id"};
  const std::string line(marin::fuzz::as_text(data + 1, size - 1));
  const std::string why =
      marin::data::jsonl_fast_disagreement(fast, line, (data[0] & 1) ? nested : text, id);
  if (!why.empty()) {
    std::fprintf(stderr, "fast path disagrees with the rule: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
