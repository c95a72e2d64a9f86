#include "parallel/agreement.hpp"

#include <fmt/core.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace marin::parallel {

namespace {

// "/optim/lr" (a flattened JSON pointer) as the dotted name the user knows: "optim.lr".
std::string dotted(const std::string& pointer) {
  std::string s = pointer.empty() ? pointer : pointer.substr(1);
  for (char& ch : s)
    if (ch == '/') ch = '.';
  return s;
}

}  // namespace

void require_agreement(Comm& c, const nlohmann::json& settings, std::string_view what) {
  if (c.size() == 1) return;
  std::string root_text = settings.dump();
  c.broadcast(root_text);
  // Our own dump, so it parses (and nesting is bounded by the options' own shape).
  const nlohmann::json root = nlohmann::json::parse(root_text).flatten();
  const nlohmann::json mine = settings.flatten();
  // One flag per setting of rank 0 (in its sorted order, the same on every rank), and a last one
  // for settings rank 0 does not have.
  std::vector<int64_t> differs(root.size() + 1, 0);
  size_t i = 0;
  for (auto it = root.begin(); it != root.end(); ++it, ++i) {
    const auto m = mine.find(it.key());
    differs[i] = m == mine.end() || *m != *it;
  }
  for (auto it = mine.begin(); it != mine.end(); ++it)
    if (!root.contains(it.key())) differs.back() = 1;
  c.allreduce(differs.data(), int64_t(differs.size()), Op::Max);
  std::string names;
  i = 0;
  for (auto it = root.begin(); it != root.end(); ++it, ++i)
    if (differs[i])
      names +=
          fmt::format("{}{} (rank 0: {})", names.empty() ? "" : ", ", dotted(it.key()), it->dump());
  if (differs.back())
    names += fmt::format("{}settings rank 0 does not have", names.empty() ? "" : ", ");
  if (!names.empty())
    fail("the ranks were started with different {}: {} — every rank must run the same command",
         what, names);
}

void agree_on_error(Comm& c, const std::string& error, std::string_view what) {
  const std::vector<std::string> all = c.allgather(error);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) fail("{}: rank {} of {} failed: {}", what, r, all.size(), all[r]);
}

}  // namespace marin::parallel
