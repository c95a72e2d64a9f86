#include "core/toml_file.hpp"

#include <fmt/core.h>

#include <toml++/toml.h>
#include <cmath>
#include <sstream>

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace marin {

struct TomlFile::Impl {
  toml::table root;
};

TomlFile::TomlFile(std::unique_ptr<Impl> impl, std::string origin)
    : impl_(std::move(impl)), origin_(std::move(origin)) {}
TomlFile::TomlFile(TomlFile&&) noexcept = default;
TomlFile& TomlFile::operator=(TomlFile&&) noexcept = default;
TomlFile::~TomlFile() = default;

TomlFile TomlFile::load(const std::string& path) {
  return parse(read_file(path), path);
}

TomlFile TomlFile::parse(std::string_view text, const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    fail("{}:{}:{}: TOML error: {}", origin, e.source().begin.line, e.source().begin.column,
         e.description());
  }
  return TomlFile(std::move(impl), origin);
}

namespace {

const toml::node* find(const toml::table& root, std::string_view key) {
  if (key.empty()) return &root;
  return root.at_path(key).node();
}

std::string describe(const toml::node& n) {
  std::ostringstream ss;
  if (n.is_table())
    ss << "a table";
  else if (n.is_array())
    ss << "an array";
  else if (n.is_string())
    ss << '"' << n.as_string()->get() << '"';
  else
    n.visit([&](auto&& v) { ss << v; });
  return ss.str();
}

nlohmann::json to_json(const toml::node& n) {
  if (const auto* t = n.as_table()) {
    nlohmann::json j = nlohmann::json::object();
    for (auto& [k, v] : *t) j[std::string(k.str())] = to_json(v);
    return j;
  }
  if (const auto* a = n.as_array()) {
    nlohmann::json j = nlohmann::json::array();
    for (auto& v : *a) j.push_back(to_json(v));
    return j;
  }
  if (const auto* s = n.as_string()) return s->get();
  if (const auto* i = n.as_integer()) return i->get();
  if (const auto* f = n.as_floating_point()) {
    if (std::isfinite(f->get())) return f->get();
    std::ostringstream ss;  // what toml++'s JSON formatter wrote: JSON has no inf or nan
    ss << *f;
    return ss.str();
  }
  if (const auto* b = n.as_boolean()) return b->get();
  std::ostringstream ss;  // date, time, date-time: their TOML text
  n.visit([&](auto&& v) { ss << v; });
  return ss.str();
}

}  // namespace

TomlFile::Kind TomlFile::kind(std::string_view key) const {
  const toml::node* n = find(impl_->root, key);
  if (!n) return Kind::Missing;
  switch (n->type()) {
    case toml::node_type::table:
      return Kind::Table;
    case toml::node_type::array:
      return Kind::Array;
    case toml::node_type::string:
      return Kind::String;
    case toml::node_type::integer:
      return Kind::Integer;
    case toml::node_type::floating_point:
      return Kind::Real;
    case toml::node_type::boolean:
      return Kind::Bool;
    default:
      return Kind::Date;
  }
}

std::vector<std::string> TomlFile::keys(std::string_view table) const {
  std::vector<std::string> out;
  const toml::node* n = find(impl_->root, table);
  if (n && n->is_table())
    for (auto& [k, v] : *n->as_table()) out.emplace_back(k.str());
  return out;
}

std::string TomlFile::where(std::string_view key) const {
  const toml::node* n = find(impl_->root, key);
  if (!n || !n->source().begin) return origin_;
  return fmt::format("{}:{}", origin_, n->source().begin.line);
}

void TomlFile::fail_field(std::string_view key, std::string_view what) const {
  fail("{}: field '{}' {}", where(key), key, what);
}

std::optional<int64_t> TomlFile::integer_if(std::string_view key, int64_t lo, int64_t hi) const {
  const toml::node* n = find(impl_->root, key);
  if (!n) return std::nullopt;
  const auto* i = n->as_integer();
  if (!i || i->get() < lo || i->get() > hi)
    fail_field(key, fmt::format("must be an integer in [{}, {}], got {}", lo, hi, describe(*n)));
  return i->get();
}

std::optional<double> TomlFile::number_if(std::string_view key, double lo, double hi) const {
  const toml::node* n = find(impl_->root, key);
  if (!n) return std::nullopt;
  std::optional<double> v;
  if (const auto* f = n->as_floating_point()) v = f->get();
  if (const auto* i = n->as_integer()) v = double(i->get());
  if (!v || !(*v >= lo && *v <= hi))  // NaN is outside every range
    fail_field(key, fmt::format("must be a number in [{}, {}], got {}", lo, hi, describe(*n)));
  return v;
}

double TomlFile::real(std::string_view key) const {
  const toml::node* n = find(impl_->root, key);
  if (!n) fail("{}: missing field '{}' (a number)", origin_, key);
  if (const auto* f = n->as_floating_point()) return f->get();
  if (const auto* i = n->as_integer()) return double(i->get());
  fail_field(key, fmt::format("must be a number, got {}", describe(*n)));
}

int64_t TomlFile::integer(std::string_view key, int64_t lo, int64_t hi) const {
  const std::optional<int64_t> v = integer_if(key, lo, hi);
  if (!v) fail("{}: missing field '{}' (an integer in [{}, {}])", origin_, key, lo, hi);
  return *v;
}

double TomlFile::number(std::string_view key, double lo, double hi) const {
  const std::optional<double> v = number_if(key, lo, hi);
  if (!v) fail("{}: missing field '{}' (a number in [{}, {}])", origin_, key, lo, hi);
  return *v;
}

std::string TomlFile::string(std::string_view key) const {
  const toml::node* n = find(impl_->root, key);
  if (!n) fail("{}: missing field '{}' (a string)", origin_, key);
  if (!n->is_string()) fail_field(key, fmt::format("must be a string, got {}", describe(*n)));
  return n->as_string()->get();
}

std::vector<std::string> TomlFile::strings(std::string_view key) const {
  const toml::node* n = find(impl_->root, key);
  if (!n) fail("{}: missing field '{}' (a list of strings)", origin_, key);
  std::vector<std::string> out;
  const auto* a = n->as_array();
  if (!a) fail_field(key, fmt::format("must be a list of strings, got {}", describe(*n)));
  for (auto& e : *a) {
    if (!e.is_string())
      fail_field(key, fmt::format("must be a list of strings, got {}", describe(e)));
    out.push_back(e.as_string()->get());
  }
  return out;
}

nlohmann::json TomlFile::json(std::string_view table) const {
  const toml::node* n = find(impl_->root, table);
  if (!n) return nlohmann::json::object();
  return to_json(*n);
}

}  // namespace marin
