// Input enumeration for --in: files, directories (recursive, sorted) and globs.
#include "data/sources/inputs.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"

namespace marin::data {

namespace fs = std::filesystem;

namespace {

// "" for a regular file (following symlinks), else what it is.
std::string not_regular(const std::string& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0)
    return errno == ELOOP ? "symlink loop" : fmt::format("cannot stat: {}", std::strerror(errno));
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISFIFO(st.st_mode)) return "a FIFO, not a regular file";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISSOCK(st.st_mode)) return "a socket, not a regular file";
  return "a device, not a regular file";
}

void walk(const std::string& root, InputList& out) {
  std::vector<std::string> rels;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) fail("--in {}: cannot read the directory: {}", root, ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) fail("--in {}: cannot walk the directory: {}", root, ec.message());
    const fs::path p = it->path();
    if (it->is_symlink(ec) && it->is_directory(ec)) {
      out.rejected.push_back(p.string() + ": a symlinked directory (not followed)");
      continue;
    }
    if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
    rels.push_back(p.lexically_relative(root).string());
  }
  std::sort(rels.begin(), rels.end());
  for (const std::string& rel : rels) {
    const std::string path = (fs::path(root) / rel).string();
    if (const std::string why = not_regular(path); !why.empty())
      out.rejected.push_back(path + ": " + why);
    else
      out.files.push_back({path, root, rel});
  }
}

}  // namespace

InputList list_inputs(const std::vector<std::string>& paths) {
  InputList out;
  for (const std::string& p : paths) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) {
      if (fs::is_directory(fs::path(p)) && !S_ISLNK(st.st_mode)) {
        walk(p, out);
        continue;
      }
      if (const std::string why = not_regular(p); !why.empty()) {
        if (why == "a directory") {
          walk(p, out);
          continue;
        }
        fail("--in {}: {}", p, why);
      }
      out.files.push_back({p, "", fs::path(p).filename().string()});
      continue;
    }
    glob_t g{};
    const int r = ::glob(p.c_str(), GLOB_NOSORT, nullptr, &g);
    std::vector<std::string> hits;
    if (r == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) hits.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (hits.empty())
      fail("--in {}: no such file or directory, and no file matches it as a glob", p);
    std::sort(hits.begin(), hits.end());
    for (const std::string& h : hits) {
      if (const std::string why = not_regular(h); !why.empty())
        out.rejected.push_back(h + ": " + why);
      else
        out.files.push_back({h, "", fs::path(h).filename().string()});
    }
  }
  return out;
}

std::string hub_split(const std::string& rel) {
  // The split is a word of the file name (train-00000-of-00002.parquet, validation.jsonl) or a
  // directory name (data/validation/...).
  for (const fs::path& part : fs::path(rel)) {
    std::string s = part.string();
    const size_t cut = s.find_first_of("-_.");
    const std::string word = s.substr(0, cut);
    if (word == "train") return "train";
    if (word == "validation" || word == "valid" || word == "dev") return "valid";
    if (word == "test") return "test";
  }
  return "";
}

}  // namespace marin::data
