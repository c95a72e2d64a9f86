// marin tokenize --in: each input file's documents, in order, encoded in parallel batches and cut
// into token shards of bounded size; memory holds one batch and one shard, whatever the input.
#include "data/sources/tokenize_inputs.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <mutex>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "core/progress.hpp"
#include "data/sources/inputs.hpp"
#include "data/sources/split_rule.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "parallel/agreement.hpp"
#include "parallel/comm.hpp"

namespace marin::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Planned {
  InputFile in;
  const SourceFormat* format;
  std::string domain, hub_split;
  uint64_t size = 0;
  int64_t mtime = 0;
};

void check_domain(const std::string& d, const std::string& file) {
  if (d.empty() || d == "." || d == ".." || d.find_first_of("/\\") != d.npos)
    fail("{}: domain '{}' is not a usable directory name", file, d);
}

std::vector<Planned> plan(const TokenizeInputsOptions& o) {
  const InputList inputs = list_inputs(o.inputs);
  std::vector<Planned> out;
  std::vector<std::string> unmatched = inputs.rejected;
  for (const InputFile& f : inputs.files) {
    std::string why;
    const SourceFormat* fmt =
        o.format == "auto" ? detect_format(f.path, why) : &source_format(o.format);
    if (!fmt) {
      unmatched.push_back(f.path + ": " + why);
      continue;
    }
    if (!fmt->open) fail("{}: --format {}: {}", f.path, fmt->name, fmt->unavailable);
    Planned p{f, fmt, o.domain, hub_split(f.rel)};
    if (o.domain_from_dir) {
      const fs::path rel(f.rel);
      if (f.root.empty() || std::distance(rel.begin(), rel.end()) < 2)
        fail("{}: --domain-from dir needs the file inside a directory below an --in directory",
             f.path);
      p.domain = rel.begin()->string();
    }
    check_domain(p.domain, f.path);
    struct stat st {};
    if (::stat(f.path.c_str(), &st) == 0) {
      p.size = static_cast<uint64_t>(st.st_size);
      p.mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    }
    out.push_back(std::move(p));
  }
  if (out.empty())
    fail("tokenize --in {}: no input file matched{}{}", fmt::join(o.inputs, " "),
         unmatched.empty() ? "" : ":\n  ", fmt::join(unmatched, "\n  "));
  return out;
}

// A split's documents of one input file, cut into shards.
struct Pending {
  std::vector<uint64_t> offsets{0};
  std::vector<uint32_t> tokens;
  uint64_t bytes = 0;
  uint32_t piece = 0;
};

struct FileRun {
  const Tokenizer& tok;
  const TokenizeInputsOptions& o;
  const Planned& p;
  size_t index;
  std::vector<TokenShardInfo> shards;
  std::map<std::string, uint64_t> skipped;
  Pending train, valid;

  void flush(const std::string& split, Pending& s) {
    if (s.offsets.size() == 1) return;  // no document
    TokenShardInfo info{fmt::format("{}/{}-{:05d}-{:04d}.tok", p.domain, split, index, s.piece),
                        p.domain,
                        split,
                        s.offsets.size() - 1,
                        s.tokens.size(),
                        s.bytes};
    fs::create_directories(fs::path(o.out) / p.domain);
    write_token_shard((fs::path(o.out) / info.file).string(), tok.vocab_size(), tok.hash(), s.bytes,
                      s.offsets, s.tokens);
    shards.push_back(std::move(info));
    s = Pending{};
    s.piece = static_cast<uint32_t>(shards.size());
  }

  void add(const std::string& split, std::vector<uint32_t>& ids, uint64_t bytes) {
    Pending& s = split == "train" ? train : valid;
    s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
    s.offsets.push_back(s.tokens.size());
    s.bytes += bytes;
    if (s.tokens.size() >= o.shard_tokens) flush(split, s);
  }
};

json file_state(const Planned& p, const Tokenizer& tok) {
  return {{"path", p.in.path},
          {"size", p.size},
          {"mtime_ns", p.mtime},
          {"tokenizer_hash", hex64(tok.hash())},
          {"domain", p.domain}};
}

// The rank that tokenizes each file: the largest files first, each to the rank with the fewest
// bytes so far (ties to the lowest rank). Every rank computes the same assignment.
std::vector<int> assign_files(const std::vector<Planned>& files, int ranks) {
  std::vector<size_t> order(files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return files[a].size > files[b].size; });
  std::vector<uint64_t> load(size_t(ranks), 0);
  std::vector<int> owner(files.size(), 0);
  for (size_t i : order) {
    const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[size_t(r)] += files[i].size;
  }
  return owner;
}

// Tokenizes one input file into its shards; returns its state (what .tokenize/FFFFF.json holds).
json tokenize_file(const Tokenizer& tok, const TokenizeInputsOptions& o, const Planned& p,
                   size_t fi, Progress& progress) {
  const bool want_train = std::find(o.splits.begin(), o.splits.end(), "train") != o.splits.end();
  const bool want_valid = std::find(o.splits.begin(), o.splits.end(), "valid") != o.splits.end();
  const int threads = std::max(1, o.threads);
  FileRun run{tok, o, p, fi, {}, {}, {}, {}};
  std::unique_ptr<DocumentSource> src = p.format->open(p.in.path, o.source);
  std::vector<Document> batch;
  std::vector<std::vector<uint32_t>> ids;
  std::vector<std::string> splits;
  uint64_t seen = 0;
  for (bool more = true; more;) {
    batch.clear();
    uint64_t batch_bytes = 0;
    while (batch_bytes < (8u << 20) && batch.size() < 4096) {
      batch.emplace_back();
      if (!src->next(batch.back())) {
        batch.pop_back();
        more = false;
        break;
      }
      batch_bytes += batch.back().text.size();
    }
    ids.assign(batch.size(), {});
    splits.assign(batch.size(), "");
    for (size_t i = 0; i < batch.size(); ++i) {
      const Document& d = batch[i];
      splits[i] = !d.split.empty() ? d.split
                  : !p.hub_split.empty()
                      ? p.hub_split
                      : std::string(split_for(d.id.empty() ? d.text : d.id, o.valid_fraction));
    }
    std::exception_ptr error;
    std::mutex mu;
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
    for (int64_t i = 0; i < int64_t(batch.size()); ++i) {
      try {
        if ((splits[i] == "train" && want_train) || (splits[i] == "valid" && want_valid))
          encode_document(tok, batch[i].text, ids[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (splits[i] == "test") {
        ++run.skipped["test split (not tokenized)"];
        continue;
      }
      if ((splits[i] == "train" && want_train) || (splits[i] == "valid" && want_valid))
        run.add(splits[i], ids[i], batch[i].text.size());
    }
    const uint64_t now = src->bytes_read();
    if (o.progress) progress.add(now - seen);
    seen = now;
  }
  run.flush("train", run.train);
  run.flush("valid", run.valid);
  for (const auto& [k, v] : src->skipped()) run.skipped[k] += v;
  json shards = json::array();
  for (const TokenShardInfo& s : run.shards) shards.push_back(marin::to_json(s));
  return {{"file", file_state(p, tok)},        {"splits", o.splits}, {"format", p.format->name},
          {"xxh64", hex64(src->file_xxh64())}, {"shards", shards},   {"skipped", run.skipped}};
}

// The state a finished earlier run (or another rank) left for file `fi`, if it matches.
std::optional<json> finished_state(const std::string& path, const json& want_file,
                                   const std::vector<std::string>& splits) {
  if (!fs::exists(path)) return std::nullopt;
  std::optional<json> s = try_parse_json(read_file(path));
  if (s && s->is_object() && s->value("file", json()) == want_file &&
      s->value("splits", json()) == json(splits))
    return s;
  return std::nullopt;
}

}  // namespace

TokenManifest tokenize_inputs(const Tokenizer& tok, const TokenizeInputsOptions& o) {
  for (const auto& s : o.splits)
    if (s != "train" && s != "valid") fail("tokenize: split '{}' must be train or valid", s);
  if (!(o.valid_fraction >= 0 && o.valid_fraction <= 1))
    fail("--valid-fraction {}: expected a fraction in [0, 1]", o.valid_fraction);
  if (o.format != "auto") source_format(o.format);  // an unknown name is refused before any work
  const std::vector<Planned> files = plan(o);
  const int rank = o.group ? o.group->rank() : 0, ranks = o.group ? o.group->size() : 1;
  if (ranks > 1) {
    // Ranks that see other files or options would write one manifest from different plans.
    json settings = {{"out", o.out},
                     {"format", o.format},
                     {"splits", o.splits},
                     {"valid_fraction", o.valid_fraction},
                     {"tokenizer", hex64(tok.hash())}};
    for (const Planned& p : files) settings["files"].push_back(file_state(p, tok));
    parallel::require_agreement(*o.group, settings, "tokenize");
  }
  const std::vector<int> owner = assign_files(files, ranks);
  fs::create_directories(fs::path(o.out) / ".tokenize");
  uint64_t mine = 0;
  for (size_t fi = 0; fi < files.size(); ++fi)
    if (owner[fi] == rank) mine += files[fi].size;
  Progress progress(o.progress && rank == 0 ? mine : 0, "tokenize", "B");
  auto state_path = [&](size_t fi) {
    return (fs::path(o.out) / ".tokenize" / fmt::format("{:05d}.json", fi)).string();
  };
  for (size_t fi = 0; fi < files.size(); ++fi) {
    if (owner[fi] != rank) continue;
    if (finished_state(state_path(fi), file_state(files[fi], tok), o.splits)) {
      if (o.progress) progress.add(files[fi].size);
      continue;
    }
    const json state = tokenize_file(tok, o, files[fi], fi, progress);
    // Written last: its presence says every shard of the file is complete.
    write_file_atomic(state_path(fi), state.dump(1) + "\n");
  }
  progress.finish();
  if (o.group) o.group->barrier();

  TokenManifest m;
  m.dir = o.out;
  m.tokenizer_hash = tok.hash();
  m.vocab_size = tok.vocab_size();
  m.corpus = fmt::format("{}", fmt::join(o.inputs, " "));
  m.shards = kept_shards(o.out, tok, o.splits);
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const Planned& p = files[fi];
    const std::optional<json> state = finished_state(state_path(fi), file_state(p, tok), o.splits);
    if (!state)
      fail(
          "{}: rank {} finished without the state of {} (is {} on a file system every rank "
          "shares?)",
          state_path(fi), owner[fi], p.in.path, o.out);
    uint64_t docs = 0;
    for (const json& s : state->at("shards")) {
      TokenShardInfo i{s.at("file"),      s.at("domain"), s.at("split"),
                       s.at("documents"), s.at("tokens"), s.at("bytes")};
      docs += i.documents;
      m.shards.push_back(std::move(i));
    }
    for (const auto& [k, v] : state->at("skipped").items()) m.skipped[k] += v.get<uint64_t>();
    m.sources.push_back({{"file", p.in.path},
                         {"size", p.size},
                         {"xxh64", state->at("xxh64")},
                         {"format", state->at("format")},
                         {"domain", p.domain},
                         {"documents", docs}});
  }
  if (rank == 0)
    write_file_atomic((fs::path(o.out) / "manifest.json").string(), m.to_json().dump(2) + "\n");
  return m;
}

}  // namespace marin::data
