// Reading rendered harness tasks and running the Jinja2 renderer. See task_items.hpp.
#include "eval/tasks/task_items.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "eval/tasks/generation.hpp"
#include "eval/tasks/parquet_docs.hpp"

extern char** environ;

namespace marin::eval {
namespace fs = std::filesystem;
using json = nlohmann::json;

const char* output_type_name(OutputType t) {
  switch (t) {
    case OutputType::MultipleChoice:
      return "multiple_choice";
    case OutputType::Loglikelihood:
      return "loglikelihood";
    case OutputType::LoglikelihoodRolling:
      return "loglikelihood_rolling";
    case OutputType::GenerateUntil:
      return "generate_until";
  }
  return "?";
}

namespace {

// A directory for the renderer's files: this process's own under the temporary directory,
// removed when it goes out of scope whatever the renderer or the reader says, or the caller's
// (`given`, kept).
class ScratchDir {
 public:
  explicit ScratchDir(std::string_view name, const fs::path& given = {})
      : path_(given.empty() ? fs::temp_directory_path() / fmt::format("marin-{}-{}", name, getpid())
                            : given),
        owned_(given.empty()) {
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    if (owned_) fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool owned_;
};

const std::vector<std::string>& metrics_of(OutputType t) {
  static const std::vector<std::string> mc{"acc", "acc_norm"}, ll{"perplexity", "acc"},
      roll{"word_perplexity", "byte_perplexity", "bits_per_byte"}, gen{"exact_match"};
  return t == OutputType::MultipleChoice  ? mc
         : t == OutputType::Loglikelihood ? ll
         : t == OutputType::GenerateUntil ? gen
                                          : roll;
}

std::string need_string(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) fail("{}: \"{}\" must be a string", where, key);
  return j[key].get<std::string>();
}

// The line's "gold": one index, or a list of them, each into the item's n choices (or contexts).
std::vector<int> read_gold(const json& j, const std::string& where, size_t n, const char* what) {
  const json g = j.value("gold", json());
  const json golds = g.is_array() ? g : json::array({g});
  std::vector<int> gold;
  for (const auto& x : golds) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= int64_t(n))
      fail("{}: \"gold\" {} is not an index into the {} {}", where, x.dump(), n, what);
    gold.push_back(x.get<int>());
  }
  if (gold.empty()) fail("{}: \"gold\" is empty", where);
  return gold;
}

void read_multi_input(const json& j, const std::string& where, TaskItem& it) {
  const json& cs = j["contexts"];
  if (!cs.is_array() || cs.empty()) fail("{}: \"contexts\" must be a non-empty list", where);
  for (const auto& c : cs) {
    if (!c.is_string()) fail("{}: every context must be a string, got {}", where, c.dump());
    it.contexts.push_back(c.get<std::string>());
  }
  // choices: the contexts without the few-shot prefix (acc_norm's lengths); the contexts
  // themselves when absent.
  if (j.contains("choices")) {
    const json& ch = j["choices"];
    if (!ch.is_array() || ch.size() != cs.size())
      fail("{}: \"choices\" must list one string per context ({})", where, cs.size());
    for (const auto& c : ch) {
      if (!c.is_string() || c.get<std::string>().empty())
        fail("{}: every choice must be a non-empty string (acc_norm divides by its length)", where);
      it.choices.push_back(c.get<std::string>());
    }
  } else {
    it.choices = it.contexts;
  }
  it.continuation = need_string(j, "continuation", where);
  if (it.continuation.empty()) fail("{}: \"continuation\" is empty", where);
  it.gold = read_gold(j, where, it.contexts.size(), "contexts");
  it.audit_text = j.contains("audit_text") ? need_string(j, "audit_text", where)
                                           : it.contexts[size_t(it.gold[0])];
}

}  // namespace

std::string TaskItems::items_hash(size_t n) const {
  std::string all;
  for (size_t i = 0; i < std::min(n, items.size()); ++i) {
    const TaskItem& it = items[i];
    json j = {{"context", it.context}};
    if (type == OutputType::MultipleChoice)
      j["choices"] = it.choices, j["gold"] = it.gold;
    else
      j["target"] = it.target;
    if (multi_input) j["contexts"] = it.contexts, j["continuation"] = it.continuation;
    if (type == OutputType::GenerateUntil) j["targets"] = it.targets;
    all += j.dump() + "\n";
  }
  return xxh64_hex(all);
}

TaskItems read_task_items(const std::string& file) {
  const std::string data = read_file(file);
  const auto lines = split_lines(data);
  TaskItems t;
  t.file = file;
  bool have_header = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", file, i + 1);
    const json j = parse_json(lines[i], where);
    if (!j.is_object()) fail("{}: expected a JSON object", where);
    if (!have_header) {
      have_header = true;
      const json format = j.value("format", json());
      if (format != "marin-tasks/1" && format != "marin-tasks/2")
        fail(
            "{}: expected the header {{\"format\": \"marin-tasks/1\" or \"marin-tasks/2\", …}} "
            "of a rendered task (scripts/render_tasks.py)",
            where);
      t.header = j;
      t.name = need_string(j, "task", where);
      const std::string ot = need_string(j, "output_type", where);
      if (ot == "multiple_choice")
        t.type = OutputType::MultipleChoice;
      else if (ot == "loglikelihood")
        t.type = OutputType::Loglikelihood;
      else if (ot == "loglikelihood_rolling")
        t.type = OutputType::LoglikelihoodRolling;
      else if (ot == "generate_until")
        t.type = OutputType::GenerateUntil;
      else
        fail(
            "{}: output_type \"{}\" is not supported (multiple_choice, loglikelihood, "
            "loglikelihood_rolling, generate_until)",
            where, ot);
      if (t.type == OutputType::GenerateUntil)
        t.generation = std::make_shared<GenerationConfig>(read_generation_fields(j, where));
      t.version = j.value("version", json());
      t.num_fewshot = json_value(j, "num_fewshot", 0, where);
      if (j.contains("target_delimiter"))
        t.target_delimiter = need_string(j, "target_delimiter", where);
      const auto& allowed = metrics_of(t.type);
      const bool own = j.contains("process_results");  // the task's Python names its metrics
      for (const auto& m : j.value("metrics", json::array())) {
        const std::string name = m.is_string() ? m.get<std::string>() : "";
        if (own ? name.empty() : std::find(allowed.begin(), allowed.end(), name) == allowed.end())
          fail("{}: metric {} is not supported for {} (supported: {})", where, m.dump(), ot,
               fmt::format("{}", fmt::join(allowed, ", ")));
        t.metrics.push_back(name);
      }
      if (t.metrics.empty()) t.metrics = allowed;
      continue;
    }
    TaskItem it;
    if (!j.contains("doc_id") || !j["doc_id"].is_number_unsigned())
      fail("{}: \"doc_id\" must be an integer ≥ 0", where);
    it.doc_id = j["doc_id"].get<uint64_t>();
    it.id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>()
                                                    : std::to_string(it.doc_id);
    if (j.contains("doc")) it.doc = j["doc"];
    for (const char* h : {"doc_hash", "prompt_hash", "target_hash"})
      if (j.contains(h) && j[h].is_string()) it.hashes[h] = j[h];
    const bool multi = j.contains("contexts");
    if (t.items.empty()) t.multi_input = multi;
    if (multi != t.multi_input)
      fail("{}: every item of a multi-input task has \"contexts\" (the first item {})", where,
           t.multi_input ? "has" : "has not");
    if (multi) {
      if (t.type != OutputType::MultipleChoice)
        fail("{}: \"contexts\" (multi-input) needs output_type multiple_choice", where);
      read_multi_input(j, where, it);
      t.items.push_back(std::move(it));
      continue;
    }
    it.context = need_string(j, "context", where);
    it.audit_text = j.contains("audit_text") ? need_string(j, "audit_text", where) : it.context;
    if (t.type == OutputType::MultipleChoice) {
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
        fail("{}: \"choices\" must be a non-empty list of strings", where);
      for (const auto& c : j["choices"]) {
        if (!c.is_string() || c.get<std::string>().empty())
          fail(
              "{}: every choice must be a non-empty string (acc_norm divides by its length), "
              "got {}",
              where, c.dump());
        it.choices.push_back(c.get<std::string>());
      }
      it.gold = read_gold(j, where, it.choices.size(), "choices");
    } else if (t.type == OutputType::GenerateUntil) {
      it.targets = read_generation_targets(j, where);
      it.target = it.targets[0];
    } else {
      it.target = need_string(j, "target", where);
      if (it.target.empty()) fail("{}: \"target\" is empty", where);
    }
    t.items.push_back(std::move(it));
  }
  if (!have_header) fail("{}: empty (expected a rendered task: scripts/render_tasks.py)", file);
  if (t.items.empty()) fail("{}: the task has no items", file);
  return t;
}

std::string render_script_path() {
  if (const char* e = std::getenv("MARIN_RENDER_TASKS"); e && *e) return e;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/bin/marin → scripts/render_tasks.py of the tree it was built from.
    const fs::path p = exe.parent_path().parent_path().parent_path() / "scripts/render_tasks.py";
    if (fs::exists(p)) return p.string();
  }
  return std::string(MARIN_SOURCE_DIR) + "/scripts/render_tasks.py";
}

namespace {
// Waits for the renderer; past timeout_s + kKillGraceS (the renderer's own alarm fires at
// timeout_s, but a long C call such as a huge integer power does not see it) it is killed.
// Returns its wait status, or −1 when it was killed for the time limit.
int wait_renderer(pid_t pid, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(timeout_s + RenderOptions::kKillGraceS);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) fail("task renderer: waitpid: {}", std::strerror(errno));
    if (timeout_s > 0 && std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// What one run of the renderer left: its wait status (−1: killed for the time limit) and its
// stderr, trailing newlines and spaces removed.
struct RendererExit {
  int status = 0;
  std::string message;
  bool ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Runs args[0] (the Python interpreter) with args, its stderr into err_file (read back and
// removed), under wait_renderer's time limit. `who` names the caller in a spawn failure.
RendererExit run_renderer(std::vector<std::string> args, const std::string& err_file, int timeout_s,
                          std::string_view who) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail("{}: cannot run {}: {}", who, args[0], std::strerror(rc));
  RendererExit e;
  e.status = wait_renderer(pid, timeout_s);
  e.message = fs::exists(err_file) ? read_file(err_file) : "";
  fs::remove(err_file);
  while (!e.message.empty() && (e.message.back() == '\n' || e.message.back() == ' '))
    e.message.pop_back();
  return e;
}
}  // namespace

TaskItems load_task(const std::string& yaml, const RenderOptions& o) {
  const std::string script = o.script.empty() ? render_script_path() : o.script;
  MARIN_CHECK(fs::exists(script), "{}: the task renderer is not there (set MARIN_RENDER_TASKS)",
              script);
  MARIN_CHECK(fs::exists(o.python),
              "{}: not found: the task renderer needs /usr/bin/python3 "
              "with python3-jinja2 and python3-yaml (scripts/setup.sh)",
              o.python);
  const ScratchDir scratch("tasks", o.out_dir);
  const fs::path& dir = scratch.path();
  const std::string out = (dir / (fs::path(yaml).stem().string() + ".rendered.jsonl")).string();
  const std::string err_file = out + ".stderr";
  std::vector<std::string> args{
      o.python, script, yaml, "--out", out, "--fewshot-seed", std::to_string(o.fewshot_seed)};
  if (o.num_fewshot) args.insert(args.end(), {"--num-fewshot", std::to_string(*o.num_fewshot)});
  args.insert(args.end(), {"--timeout", std::to_string(o.timeout_s), "--memory-mb",
                           std::to_string(o.memory_mb)});
  if (o.trust_task_code) args.push_back("--trust-task-code");
  if (!o.dataset_root.empty()) args.insert(args.end(), {"--dataset-root", o.dataset_root});
  if (!o.inline_from.empty())
    args.insert(args.end(),
                {"--inline-from", o.inline_from, "--inline-index", std::to_string(o.inline_index)});
  RendererExit e = run_renderer(args, err_file, o.timeout_s, yaml);
  if (e.status >= 0 && WIFEXITED(e.status) && WEXITSTATUS(e.status) == 3) {
    // The task's data has Parquet files: marin's reader writes their rows as JSON lines and the
    // renderer runs again with them (render_tasks.py --parquet-rows).
    const json need = load_json(out);
    for (size_t i = 0; i < need["parquet"].size(); ++i) {
      const std::string src = need["parquet"][i].get<std::string>();
      const std::string dst = (dir / fmt::format("parquet-{}.jsonl", i)).string();
      parquet_to_jsonl(src, dst);
      args.insert(args.end(), {"--parquet-rows", src + "=" + dst});
    }
    e = run_renderer(args, err_file, o.timeout_s, yaml);
  }
  if (e.status < 0)
    fail("{}: the task renderer did not finish within {} s and was stopped (--task-timeout)", yaml,
         o.timeout_s);
  if (!e.ok())
    fail("{}", e.message.empty()
                   ? fmt::format("{}: the task renderer failed (status {})", yaml, e.status)
                   : e.message);
  TaskItems t = read_task_items(out);
  if (t.header.contains("process_results")) {
    auto opts = std::make_shared<RenderOptions>(o);
    opts->script = script;
    t.task_code = std::move(opts);
  }
  return t;
}

json run_task_results(const TaskItems& t, const json& request) {
  MARIN_CHECK(t.task_code,
              "{}: {}: process_results needs the task's YAML (give the .yaml, not the "
              "rendered .jsonl)",
              t.file, t.name);
  const RenderOptions& o = *t.task_code;
  const std::string yaml = t.header.value("source", std::string());
  const ScratchDir scratch("task-results");
  const fs::path& dir = scratch.path();
  const std::string in = (dir / "in.json").string(), out = (dir / "out.json").string();
  write_file_atomic(in, request.dump());
  std::vector<std::string> args{o.python, o.script, "results", yaml, "--in", in, "--out", out};
  if (o.trust_task_code) args.push_back("--trust-task-code");
  if (!o.dataset_root.empty()) args.insert(args.end(), {"--dataset-root", o.dataset_root});
  if (!o.inline_from.empty())
    args.insert(args.end(),
                {"--inline-from", o.inline_from, "--inline-index", std::to_string(o.inline_index)});
  const RendererExit e =
      run_renderer(std::move(args), (dir / "stderr").string(), o.timeout_s, yaml);
  if (e.status < 0)
    fail("{}: process_results did not finish within {} s and was stopped (--task-timeout)", yaml,
         o.timeout_s);
  if (!e.ok())
    fail("{}", e.message.empty() ? fmt::format("{}: process_results failed", yaml) : e.message);
  return load_json(out);
}

namespace {
// Runs the renderer's index mode over the task directories (render_tasks.py index).
json task_index(const std::vector<std::string>& dirs) {
  const std::string script = render_script_path();
  const RenderOptions o;
  const ScratchDir scratch("task-index");
  const fs::path& tmp = scratch.path();
  const std::string out = (tmp / "index.json").string(), err_file = (tmp / "stderr").string();
  std::vector<std::string> args{o.python, script, "index"};
  args.insert(args.end(), dirs.begin(), dirs.end());
  args.insert(args.end(), {"--out", out});
  const RendererExit e = run_renderer(std::move(args), err_file, o.timeout_s, "--task-dir");
  if (e.status < 0) fail("--task-dir: indexing did not finish within {} s", o.timeout_s);
  if (!e.ok())
    fail("{}", e.message.empty() ? std::string("--task-dir: the task index failed") : e.message);
  return load_json(out);
}
}  // namespace

namespace {

// The index's resolution of names, groups expanded as the harness's TaskManager does.
struct NameResolver {
  const json& ix;
  const std::vector<std::string>& task_dirs;
  std::vector<std::string>& files;
  std::vector<TaskGroup>& groups;
  std::set<std::string> open;  // the groups being expanded (a cycle is refused)

  void add_file(const std::string& f) {
    if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
  }
  std::string task_name_of(const std::string& file) const {
    for (const auto& [t, f] : ix["tasks"].items())
      if (f == file) return t;
    return file;
  }
  bool is_group(const std::string& s) const {
    return std::any_of(groups.begin(), groups.end(),
                       [&](const TaskGroup& g) { return g.name == s; });
  }
  // The member names `s` stands for: itself (a task or group) or a tag's tasks.
  std::vector<std::string> resolve(const std::string& s, const std::string& where) {
    if (ix["duplicates"].contains(s))
      fail("{}'{}' is defined by several files: {}", where, s,
           fmt::format("{}", fmt::join(ix["duplicates"][s].get<std::vector<std::string>>(), ", ")));
    if (ix["tasks"].contains(s)) {
      add_file(ix["tasks"][s].get<std::string>());
      return {s};
    }
    if (ix["tags"].contains(s)) {
      std::vector<std::string> names;
      for (const auto& f : ix["tags"][s]) {
        add_file(f.get<std::string>());
        names.push_back(task_name_of(f.get<std::string>()));
      }
      return names;
    }
    if (ix["groups"].contains(s)) {
      expand_group(s);
      return {s};
    }
    std::string skipped;
    for (const auto& [f, why] : ix["skipped"].items())
      skipped += fmt::format("; {}", why.get<std::string>());
    fail("{}no task, tag or group '{}' in the YAML files below {}{}", where, s,
         fmt::format("{}", fmt::join(task_dirs, ", ")),
         skipped.empty() ? "" : " (files that could not be read" + skipped + ")");
  }
  void expand_group(const std::string& name) {
    if (is_group(name)) return;  // already expanded (a member of two groups)
    const json& cfg = ix["group_configs"][name];
    const std::string file = cfg.value("file", std::string());
    MARIN_CHECK(!open.count(name), "{}: group '{}' contains itself (through its `task:` list)",
                file, name);
    open.insert(name);
    TaskGroup g = group_from_config(name, cfg);
    const json& members = cfg["task"];
    for (size_t i = 0; i < members.size(); ++i) {
      const json& m = members[i];
      if (m.is_object()) {  // an inline task config: rendered from the group file
        MARIN_CHECK(!m.contains("group"),
                    "{}: group '{}': task[{}]: an inline group config is not supported; give it "
                    "its own YAML with a `group:` name and list that name",
                    file, name, i);
        MARIN_CHECK(m.contains("task") && m["task"].is_string(),
                    "{}: group '{}': task[{}] = {}: an inline task config needs a `task:` name",
                    file, name, i, m.dump());
        const std::string t = m["task"].get<std::string>();
        // Over the registered task it names, if any (GROUP#task[I]=BASE).
        const std::string base =
            ix["tasks"].contains(t) ? ix["tasks"][t].get<std::string>() : std::string();
        add_file(base.empty() ? fmt::format("{}#task[{}]", file, i)
                              : fmt::format("{}#task[{}]={}", file, i, base));
        if (std::find(g.members.begin(), g.members.end(), t) == g.members.end())
          g.members.push_back(t), g.leaves.push_back(t);
        continue;
      }
      MARIN_CHECK(m.is_string(),
                  "{}: group '{}': task[{}] = {}: expected a task, tag or group name", file, name,
                  i, m.dump());
      for (const std::string& n : resolve(
               m.get<std::string>(), fmt::format("{}: group '{}': task[{}]: ", file, name, i))) {
        if (std::find(g.members.begin(), g.members.end(), n) != g.members.end()) continue;
        g.members.push_back(n);
        auto sub = std::find_if(groups.begin(), groups.end(),
                                [&](const TaskGroup& x) { return x.name == n; });
        if (sub == groups.end())
          g.leaves.push_back(n);
        else
          g.leaves.insert(g.leaves.end(), sub->leaves.begin(), sub->leaves.end());
      }
    }
    open.erase(name);
    groups.push_back(std::move(g));  // after its subgroups: members before their groups
  }
};

}  // namespace

std::vector<std::string> resolve_task_files(const std::vector<std::string>& specs,
                                            const std::vector<std::string>& task_dirs,
                                            std::vector<TaskGroup>* groups) {
  std::vector<std::string> out;
  std::vector<TaskGroup> found;
  std::optional<json> index;
  for (const std::string& s : specs) {
    const std::string ext = fs::path(s).extension().string();
    if (ext == ".yaml" || ext == ".yml" || ext == ".jsonl") {
      MARIN_CHECK(fs::exists(s), "--tasks: {}: no such file", s);
      out.push_back(s);
      continue;
    }
    MARIN_CHECK(!task_dirs.empty(),
                "--tasks: '{}' is a task name: give --task-dir (a directory of harness task "
                "files, e.g. marin tasks build's) or a path to its .yaml",
                s);
    if (!index) index = task_index(task_dirs);
    NameResolver{*index, task_dirs, out, found, {}}.resolve(s, "--tasks: ");
  }
  if (groups) *groups = std::move(found);
  return out;
}

std::vector<std::string> resolve_task_files(const std::vector<std::string>& specs,
                                            const std::string& task_dir) {
  return resolve_task_files(
      specs, task_dir.empty() ? std::vector<std::string>{} : std::vector<std::string>{task_dir});
}

TaskItems load_task_file(const std::string& file, const RenderOptions& opts) {
  if (fs::path(file).extension() == ".jsonl") {
    MARIN_CHECK(!opts.num_fewshot,
                "{}: a rendered task has its few-shot examples in it: render the YAML again "
                "for --num-fewshot",
                file);
    return read_task_items(file);
  }
  // A group's inline task config (resolve_task_files): GROUP#task[I] or GROUP#task[I]=BASE.
  const size_t at = file.rfind("#task[");
  if (at != std::string::npos && !fs::exists(file)) {
    const size_t close = file.find(']', at);
    MARIN_CHECK(close != std::string::npos, "--tasks: {}: not a task file", file);
    RenderOptions o = opts;
    o.inline_from = file.substr(0, at);
    o.inline_index = std::stoi(file.substr(at + 6, close - at - 6));
    const std::string base =
        close + 1 < file.size() && file[close + 1] == '=' ? file.substr(close + 2) : o.inline_from;
    return load_task(base, o);
  }
  return load_task(file, opts);
}

}  // namespace marin::eval
