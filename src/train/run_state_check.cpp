#include "train/run_state_check.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "train/checkpoint.hpp"

namespace marin {

std::string state_checksum(const nlohmann::json& state) {
  nlohmann::json rest = state;
  rest.erase("state_xxh64");
  return xxh64_hex(rest.dump());
}

nlohmann::json read_state_json(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/state.json";
  const std::string text = read_file(path);
  if (text.empty()) fail("{}: empty (expected the checkpoint's state)", path);
  const nlohmann::json j =
      parse_json(text, path, fmt::format("{} bytes; truncated or damaged", text.size()));
  if (!j.is_object()) fail("{}: expected a JSON object, got {}", path, j.type_name());
  if (j.contains("state_xxh64")) {
    const auto& want = j["state_xxh64"];
    const std::string got = state_checksum(j);
    if (!want.is_string() || want.get<std::string>() != got)
      fail(
          "{}: checksum mismatch (state_xxh64 says {}, the contents hash to {}): the state is "
          "damaged",
          path, want.dump(), got);
  }
  return j;
}

namespace {

void check_fields(const std::string& ckpt_dir, const RunState& st) {
  const std::string path = ckpt_dir + "/state.json";
  const TrainOptions& o = st.options;
  auto bad = [&](const std::string& field, const std::string& value, const std::string& expected) {
    fail("{}: {} = {} is inconsistent (expected {})", path, field, value, expected);
  };
  // Each option's own range is checked as it is read (TrainOptions::from_json and its table);
  // here: what holds between fields.
  if (st.step < 0 || st.step > o.steps)
    bad("step", std::to_string(st.step),
        fmt::format("a value in [0, options.steps = {}]", o.steps));
  if (o.micro_batch > 0 && o.batch % o.micro_batch != 0)
    bad("options.micro_batch", std::to_string(o.micro_batch),
        fmt::format("0 or a divisor of options.batch = {}", o.batch));
  try {
    o.model.validate();
  } catch (const Error& e) {
    fail("{}: options.model: {}", path, e.what());
  }
  // The checkpoint's public model files must describe the same model as its state.
  const ModelConfig c = load_config(ckpt_dir);
  if (c.to_json() != o.model.to_json()) {
    const nlohmann::json a = c.to_json(), b = o.model.to_json();
    std::string field;
    for (auto& [k, v] : a.items())
      if (!b.contains(k) || b[k] != v) {
        field = k;
        break;
      }
    fail("{}/config.json: {} = {} but state.json's options.model says {}", ckpt_dir, field,
         a.value(field, nlohmann::json()).dump(), b.value(field, nlohmann::json()).dump());
  }
  // The data position: rows read so far = step × batch, unless a fork started it elsewhere.
  const bool forked = st.lineage.is_object() && st.lineage.contains("forked_from");
  const nlohmann::json& d = st.data_state;
  if (!d.is_object()) bad("data", d.dump(), "an object");
  const std::string kind = d.value("kind", "");
  const int64_t read = st.step * int64_t(o.batch);
  if (kind == "rows") {
    if (!d.contains("next_row") || !d["next_row"].is_number_integer())
      bad("data.next_row", d.value("next_row", nlohmann::json()).dump(), "an integer");
    const int64_t next = d["next_row"].get<int64_t>();
    const int64_t rows = d.value("rows", int64_t(0));
    if (next < 0 || (rows > 0 && next >= rows))
      bad("data.next_row", std::to_string(next),
          rows > 0 ? fmt::format("a row in [0, {})", rows) : std::string("a row ≥ 0"));
    if (!forked && rows > 0 && next != read % rows)
      bad("data.next_row", std::to_string(next),
          fmt::format("{} (step {} × batch {} mod {} rows)", read % rows, st.step, o.batch, rows));
  } else if (kind == "mixture") {
    const int64_t row = d.value("row", int64_t(-1));
    if (row < 0) bad("data.row", d.value("row", nlohmann::json()).dump(), "a row ≥ 0");
    if (!forked && row != read)
      bad("data.row", std::to_string(row),
          fmt::format("{} (step {} × batch {})", read, st.step, o.batch));
  } else {
    bad("data.kind", d.value("kind", nlohmann::json()).dump(), "\"rows\" or \"mixture\"");
  }
}

}  // namespace

void check_run_state(const std::string& ckpt_dir, const RunState& st) {
  try {
    check_fields(ckpt_dir, st);
  } catch (const nlohmann::json::exception& e) {
    fail("{}/state.json: malformed field: {}", ckpt_dir, e.what());
  }
}

}  // namespace marin
