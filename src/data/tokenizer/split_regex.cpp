#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizer/split_regex.hpp"

#include <pcre2.h>

#include "core/error.hpp"

namespace marin {
namespace {

// Per-thread PCRE2 state: match data with one ovector pair and a JIT stack big enough for the
// look-ahead alternatives on long whitespace runs.
struct ThreadState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadState() {
    md = pcre2_match_data_create(1, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (mctx && stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
  }
  ~ThreadState() {
    pcre2_match_data_free(md);
    pcre2_match_context_free(mctx);
    pcre2_jit_stack_free(stack);
  }
};

ThreadState& tls() {
  thread_local ThreadState s;
  return s;
}

std::string pcre_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

SplitRegex::SplitRegex(const std::string& pattern) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!code_)
    fail("split regex does not compile at offset {}: {} (pattern: {})", off, pcre_message(err),
         pattern);
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::~SplitRegex() {
  pcre2_code_free(code_);
}

bool SplitRegex::find(std::string_view text, size_t pos, size_t& start, size_t& end) const {
  ThreadState& t = tls();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, 0, t.md, t.mctx)
                : pcre2_match(code_, subject, text.size(), pos, 0, t.md, t.mctx);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) fail("split regex failed at byte {}: {}", pos, pcre_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(t.md);
  start = ov[0];
  end = ov[1];
  return true;
}

}  // namespace marin
