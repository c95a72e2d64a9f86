// Post-processors of a tokenizer.json, for a single sequence: TemplateProcessing, ByteLevel (no
// effect on ids), RobertaProcessing, BertProcessing and Sequence. Each reduces to the ids put
// before and after the sequence (huggingface/tokenizers' src/processors).
#include <fmt/core.h>

#include "core/error.hpp"
#include "data/tokenizer/pipeline.hpp"

namespace marin::tok {

namespace {

uint32_t id_of(const json& j, const std::string& path) {
  if (!j.is_number_unsigned() || j.get<uint64_t>() > UINT32_MAX)
    fail("{}: expected a token id, found {}", path, j.dump());
  return j.get<uint32_t>();
}

// A ["token", id] pair of RobertaProcessing/BertProcessing.
uint32_t pair_id(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2)
    fail("{}.{}: expected [token, id]", path, key);
  return id_of(j[key][1], fmt::format("{}.{}[1]", path, key));
}

}  // namespace

PostProcessor parse_post_processor(const json& j, const std::string& path, int depth) {
  check_depth(path, depth);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: expected an object with a \"type\", found {}", path, j.dump().substr(0, 200));
  const std::string type = j["type"].get<std::string>();
  PostProcessor pp;
  if (type == "ByteLevel") return pp;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    pp.prefix.push_back(pair_id(j, "cls", path));
    pp.suffix.push_back(pair_id(j, "sep", path));
    return pp;
  }
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      fail("{}.processors: expected an array", path);
    for (size_t i = 0; i < j["processors"].size(); ++i) {
      // Each processor wraps what the ones before it produced.
      PostProcessor p = parse_post_processor(j["processors"][i],
                                             fmt::format("{}.processors[{}]", path, i), depth + 1);
      pp.prefix.insert(pp.prefix.begin(), p.prefix.begin(), p.prefix.end());
      pp.suffix.insert(pp.suffix.end(), p.suffix.begin(), p.suffix.end());
    }
    return pp;
  }
  if (type != "TemplateProcessing") unsupported(path + ".type", j["type"]);
  if (!j.contains("single") || !j["single"].is_array())
    fail("{}.single: expected an array of template pieces", path);
  const json specials = j.value("special_tokens", json::object());
  bool seen_sequence = false;
  for (size_t i = 0; i < j["single"].size(); ++i) {
    const json& item = j["single"][i];
    const std::string ipath = fmt::format("{}.single[{}]", path, i);
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_sequence) fail("{}: the sequence appears twice", ipath);
      seen_sequence = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") ||
        !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
      unsupported(ipath, item);
    const std::string name = item["SpecialToken"]["id"].get<std::string>();
    if (!specials.is_object() || !specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array())
      fail("{}: special token \"{}\" is not in {}.special_tokens", ipath, name, path);
    std::vector<uint32_t>& dst = seen_sequence ? pp.suffix : pp.prefix;
    for (size_t k = 0; k < specials[name]["ids"].size(); ++k)
      dst.push_back(id_of(specials[name]["ids"][k],
                          fmt::format("{}.special_tokens.{}.ids[{}]", path, name, k)));
  }
  if (!seen_sequence) fail("{}.single: the template has no Sequence", path);
  return pp;
}

}  // namespace marin::tok
