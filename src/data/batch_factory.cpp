#include "data/batch_factory.hpp"

#include <vector>

#include "core/error.hpp"
#include "data/loader.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin {
namespace {

// spec[name], which must be there with the given type.
const nlohmann::json& field(const nlohmann::json& spec, const char* name,
                            nlohmann::json::value_t type) {
  const auto it = spec.find(name);
  if (it == spec.end())
    fail("data source '{}': missing field \"{}\" in {}", spec.value("kind", ""), name, spec.dump());
  const bool ok = type == nlohmann::json::value_t::object  ? it->is_object()
                  : type == nlohmann::json::value_t::array ? it->is_array()
                                                           : it->is_string();
  if (!ok)
    fail("data source '{}': field \"{}\" must be {}, got {}", spec.value("kind", ""), name,
         type == nlohmann::json::value_t::object  ? "an object"
         : type == nlohmann::json::value_t::array ? "an array"
                                                  : "a string",
         it->dump());
  return *it;
}

std::string string_field(const nlohmann::json& spec, const char* name) {
  return field(spec, name, nlohmann::json::value_t::string).get<std::string>();
}

std::unique_ptr<BatchSource> make_mixture(const nlohmann::json& spec, const DataOptions& o) {
  LoaderOptions lo;
  lo.token_dir = string_field(spec, "tokens");
  lo.seq_len = o.seq_len;
  lo.rows_per_step = o.rows_per_step;
  lo.total_steps = o.total_steps;
  lo.seed = o.seed;
  lo.vocab_size = uint32_t(o.vocab_size);
  if (!o.tokenizer.empty()) lo.tokenizer_hash = Tokenizer::load(o.tokenizer).hash();
  return std::make_unique<MixtureLoader>(
      MixtureConfig::from_json(field(spec, "mixture", nlohmann::json::value_t::object), "mixture"),
      lo);
}

// The validation split of the given domains, in order (the same rows at every evaluation).
std::unique_ptr<BatchSource> make_validation(const nlohmann::json& spec, const DataOptions& o) {
  const std::string dir = string_field(spec, "tokens");
  const nlohmann::json& domains = field(spec, "domains", nlohmann::json::value_t::array);
  const TokenManifest m = TokenManifest::load(dir);
  const uint64_t hash =
      o.tokenizer.empty() ? m.tokenizer_hash : Tokenizer::load(o.tokenizer).hash();
  // Each shard cross-checked against the manifest (vocabulary, documents, tokens, bytes).
  std::vector<TokenShard> shards;
  for (auto& d : domains) {
    if (!d.is_string())
      fail("data source 'valid': field \"domains\" must hold names, got {}", d.dump());
    for (auto& sh : m.find(d.get<std::string>(), "valid"))
      shards.push_back(m.open(sh, hash, uint32_t(o.vocab_size)));
  }
  if (shards.empty()) fail("{}: no validation shards for domains {}", dir, domains.dump());
  return std::make_unique<ValidationSource>(std::move(shards), o.seq_len);
}

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const nlohmann::json& spec, const DataOptions& o) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object()) fail("a data source must be an object, got {}", spec.dump());
  const std::string kind = spec.value("kind", "");
  if (kind == "rows") return make_rows_source(string_field(spec, "path"), o.seq_len, o.vocab_size);
  if (kind == "mixture") return make_mixture(spec, o);
  if (kind == "valid") return make_validation(spec, o);
  fail("unknown data source kind '{}' in {}", kind, spec.dump());
}

}  // namespace marin
