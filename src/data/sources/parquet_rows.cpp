// Rows of a Parquet file as JSON objects: the schema tree, the leaf columns read by
// ParquetLeafReader (parquet_pages.cpp), and Dremel record assembly from their repetition and
// definition levels into JSON values (structs as objects, lists as arrays, nulls as null).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "data/sources/parquet_file.hpp"

namespace marin::data {

namespace {

using Json = nlohmann::ordered_json;

// A row with more entries than this in one leaf column is refused (corrupt levels must not
// allocate without bound; task rows hold a few lists of a few values).
constexpr size_t kMaxRowEntries = size_t(1) << 22;

constexpr int32_t kBoolean = 0, kInt32 = 1, kInt64 = 2, kFloat = 4, kDouble = 5, kByteArray = 6;
constexpr int32_t kOptional = 1, kRepeated = 2;
// ConvertedType values this reader gives a meaning to.
constexpr int32_t kUtf8 = 0, kMap = 1, kMapKeyValue = 2, kList = 3, kEnum = 4, kUint8 = 11,
                  kUint64 = 14, kInt64Converted = 18, kJsonConverted = 19;

std::string_view converted_name(int32_t c) {
  static constexpr std::string_view names[] = {"UTF8",
                                               "MAP",
                                               "MAP_KEY_VALUE",
                                               "LIST",
                                               "ENUM",
                                               "DECIMAL",
                                               "DATE",
                                               "TIME_MILLIS",
                                               "TIME_MICROS",
                                               "TIMESTAMP_MILLIS",
                                               "TIMESTAMP_MICROS",
                                               "UINT_8",
                                               "UINT_16",
                                               "UINT_32",
                                               "UINT_64",
                                               "INT_8",
                                               "INT_16",
                                               "INT_32",
                                               "INT_64",
                                               "JSON",
                                               "BSON",
                                               "INTERVAL"};
  return c >= 0 && c < 22 ? names[c] : "UNKNOWN_CONVERTED_TYPE";
}

// The annotation of a schema node, for messages: its logical type, else its converted type.
std::string annotation(const ParquetSchemaNode& s) {
  if (!s.logical_type.empty()) return s.logical_type;
  return s.converted_type >= 0 ? std::string(converted_name(s.converted_type)) : "";
}

bool is_list(const ParquetSchemaNode& s) {
  return s.logical_type == "LIST" || s.converted_type == kList;
}
bool is_map(const ParquetSchemaNode& s) {
  return s.logical_type == "MAP" || s.converted_type == kMap || s.converted_type == kMapKeyValue;
}

// Why a leaf's type is not read ("" when it is).
std::string leaf_refusal(const ParquetSchemaNode& s) {
  const int32_t t = s.physical_type, c = s.converted_type;
  const std::string& l = s.logical_type;
  const std::string type =
      std::string(parquet_type_name(t)) + (annotation(s).empty() ? "" : " (" + annotation(s) + ")");
  switch (t) {
    case kInt32:
    case kInt64:
      if ((l.empty() || l == "INTEGER") && (c == -1 || (c >= kUint8 && c <= kInt64Converted)))
        return "";
      return type;
    case kBoolean:
    case kFloat:
    case kDouble:
      return l.empty() && c == -1 ? "" : type;
    case kByteArray:
      if ((l.empty() || l == "STRING" || l == "ENUM" || l == "JSON") &&
          (c == -1 || c == kUtf8 || c == kEnum || c == kJsonConverted))
        return "";
      return type;
    default:
      return type;
  }
}

struct Node {
  const ParquetSchemaNode* s = nullptr;
  std::string path;  // dotted
  int def = 0, rep = 0;
  std::vector<int> kids;
  int leaf_begin = 0, leaf_end = 0;  // its leaf columns, [begin, end) in leaves
  int leaf = -1;                     // a primitive's leaf column
  // A LIST group: its repeated child, and the element's node (the repeated child itself in
  // the legacy 2-level forms).
  int list_repeated = -1, list_element = -1;
};

struct Entry {
  int rep = 0, def = 0;
  Json value;
};

using Spans = std::vector<std::pair<size_t, size_t>>;  // per leaf: [begin, end) of its entries

}  // namespace

struct ParquetRowReader::Impl {
  const ParquetFile& file;
  std::vector<Node> nodes;
  std::vector<int> top;  // the top-level fields
  std::vector<ParquetLeaf> leaves;
  std::vector<int> leaf_node;  // leaf column -> its node
  std::vector<std::unique_ptr<ParquetLeafReader>> readers;
  // Per leaf: the current row's entries, and the entry read ahead (the next row's first).
  std::vector<std::vector<Entry>> row;
  std::vector<Entry> ahead;
  std::vector<bool> have_ahead;
  std::vector<int64_t> leaf_rows;  // per leaf: rows begun (entries of repetition level 0)
  int64_t row_index = 0;

  explicit Impl(const ParquetFile& f) : file(f) {}

  [[noreturn]] void disagree(const Node& n, std::string_view why) const {
    fail(
        "{}: column '{}', row {}: the repetition and definition levels of its leaf columns "
        "are inconsistent ({})",
        file.path(), n.path, row_index, why);
  }

  void build() {
    const auto& schema = file.metadata().schema;
    std::vector<std::string> refused;
    // Parents by depth while walking the flattened schema.
    std::vector<int> stack;
    for (const ParquetSchemaNode& s : schema) {
      stack.resize(size_t(s.depth - 1));
      Node n;
      n.s = &s;
      const Node* parent = stack.empty() ? nullptr : &nodes[size_t(stack.back())];
      n.path = parent ? parent->path + "." + s.name : s.name;
      n.def = (parent ? parent->def : 0) + (s.repetition != 0 ? 1 : 0);
      n.rep = (parent ? parent->rep : 0) + (s.repetition == kRepeated ? 1 : 0);
      const int id = int(nodes.size());
      if (parent)
        nodes[size_t(stack.back())].kids.push_back(id);
      else
        top.push_back(id);
      nodes.push_back(n);
      if (s.physical_type == -1) stack.push_back(id);
    }
    // Leaves in schema order (the order of the row groups' column chunks), and each group's
    // range of them.
    for (size_t i = 0; i < nodes.size(); ++i) {
      Node& n = nodes[i];
      if (n.s->physical_type != -1) {
        n.leaf = int(leaves.size());
        leaves.push_back({{}, n.s->physical_type, n.def, n.rep});
        leaf_node.push_back(int(i));
        const std::string why = leaf_refusal(*n.s);
        if (!why.empty()) refused.push_back(fmt::format("{} ({})", n.path, why));
      }
    }
    // path_in_schema of each leaf: the names from the top-level field down.
    for (size_t l = 0; l < leaves.size(); ++l) {
      std::vector<std::string> names;
      int target = leaf_node[l];
      // Walk up by depth: the nearest earlier node of each smaller depth is an ancestor.
      int depth = nodes[size_t(target)].s->depth;
      names.push_back(nodes[size_t(target)].s->name);
      for (int i = target - 1; i >= 0 && depth > 1; --i)
        if (nodes[size_t(i)].s->depth == depth - 1) {
          names.push_back(nodes[size_t(i)].s->name);
          --depth;
        }
      leaves[l].path.assign(names.rbegin(), names.rend());
    }
    for (int t : top) ranges(t, refused);
    if (!refused.empty())
      fail(
          "{}: Parquet columns of types marin does not read: {} (read: BOOLEAN, INT32, INT64 "
          "with integer annotations, FLOAT, DOUBLE, BYTE_ARRAY strings, structs and lists)",
          file.path(), fmt::join(refused, ", "));
    for (size_t l = 0; l < leaves.size(); ++l)
      readers.push_back(
          std::make_unique<ParquetLeafReader>(file, leaves[l], nodes[size_t(leaf_node[l])].path));
    row.resize(leaves.size());
    ahead.resize(leaves.size());
    have_ahead.assign(leaves.size(), false);
    leaf_rows.assign(leaves.size(), 0);
    for (size_t l = 0; l < leaves.size(); ++l) advance(l);
  }

  // Sets leaf ranges and the LIST structure under node `id`; notes refused groups.
  void ranges(int id, std::vector<std::string>& refused) {
    Node& n = nodes[size_t(id)];
    if (n.leaf >= 0) {
      n.leaf_begin = n.leaf;
      n.leaf_end = n.leaf + 1;
      return;
    }
    const std::vector<int> kids = n.kids;
    for (int k : kids) ranges(k, refused);
    Node& g = nodes[size_t(id)];  // (no reallocation above; re-take for clarity)
    if (kids.empty()) {
      refused.push_back(fmt::format("{} (a group without fields)", g.path));
      return;
    }
    g.leaf_begin = nodes[size_t(kids.front())].leaf_begin;
    g.leaf_end = nodes[size_t(kids.back())].leaf_end;
    if (is_map(*g.s)) {
      refused.push_back(fmt::format("{} (MAP)", g.path));
      return;
    }
    if (is_list(*g.s)) {
      const Node& r = nodes[size_t(kids[0])];
      if (kids.size() != 1 || r.s->repetition != kRepeated) {
        refused.push_back(
            fmt::format("{} (a LIST whose only field is not one repeated field)", g.path));
        return;
      }
      if (r.s->physical_type == -1 && r.kids.empty()) return;  // refused above
      g.list_repeated = kids[0];
      // The backward-compatibility rules of the Parquet format's LogicalTypes.md.
      const bool two_level = r.s->physical_type != -1 || r.kids.size() > 1 ||
                             r.s->name == "array" || r.s->name == g.s->name + "_tuple";
      g.list_element = two_level ? kids[0] : r.kids[0];
    }
  }

  void advance(size_t l) {
    int rep, def;
    have_ahead[l] = readers[l]->next(rep, def);
    if (!have_ahead[l]) return;
    Entry& e = ahead[l];
    e.rep = rep;
    e.def = def;
    e.value = nullptr;
    if (rep == 0) ++leaf_rows[l];
    if (def < leaves[l].max_def) return;
    const ParquetLeafReader& r = *readers[l];
    const ParquetSchemaNode& s = *nodes[size_t(leaf_node[l])].s;
    switch (leaves[l].physical_type) {
      case kBoolean:
        e.value = r.i64() != 0;
        break;
      case kInt32:
        if (s.converted_type >= kUint8 && s.converted_type < kUint64)
          e.value = uint64_t(uint32_t(r.i64()));
        else
          e.value = r.i64();
        break;
      case kInt64:
        if (s.converted_type == kUint64)
          e.value = uint64_t(r.i64());
        else
          e.value = r.i64();
        break;
      case kFloat:
      case kDouble:
        e.value = r.f64();
        break;
      default: {
        const std::string_view v = r.bytes();
        if (!utf8::valid(v))
          fail("{}: column '{}', row {}: not UTF-8 (at byte {})", file.path(), r.name(),
               leaf_rows[l] - 1, utf8::first_invalid(v));
        e.value = std::string(v);
      }
    }
  }

  // Reads every leaf's entries of the next row; false when all have ended.
  bool read_row() {
    size_t ended = 0;
    for (size_t l = 0; l < leaves.size(); ++l) {
      row[l].clear();
      if (!have_ahead[l]) {
        ++ended;
        continue;
      }
      if (ahead[l].rep != 0)
        disagree(nodes[size_t(leaf_node[l])],
                 fmt::format("a row starts with repetition level {}", ahead[l].rep));
      do {
        if (row[l].size() >= kMaxRowEntries)
          fail("{}: column '{}', row {}: more than {} entries in one row (corrupt levels?)",
               file.path(), nodes[size_t(leaf_node[l])].path, row_index, kMaxRowEntries);
        row[l].push_back(std::move(ahead[l]));
        advance(l);
      } while (have_ahead[l] && ahead[l].rep > 0);
    }
    if (ended == leaves.size()) return false;
    if (ended != 0)
      fail("{}: row {}: the columns have different numbers of rows ({} of {} ended)", file.path(),
           row_index, ended, leaves.size());
    return true;
  }

  const Entry& first(const Node& n, const Spans& sp) const {
    const auto [b, e] = sp[size_t(n.leaf_begin)];
    if (b >= e) disagree(n, "a field without entries");
    return row[size_t(n.leaf_begin)][b];
  }

  Json value_of(int id, const Spans& sp) const {
    const Node& n = nodes[size_t(id)];
    if (n.s->repetition == kRepeated) return list_of(n, sp, -1);
    if (n.s->repetition == kOptional && first(n, sp).def < n.def) return nullptr;
    return content(id, sp);
  }

  // The node's value, present (its own repetition already handled).
  Json content(int id, const Spans& sp) const {
    const Node& n = nodes[size_t(id)];
    if (n.leaf >= 0) {
      const auto [b, e] = sp[size_t(n.leaf)];
      if (e - b != 1) disagree(n, fmt::format("{} entries for one value", e - b));
      const Entry& x = row[size_t(n.leaf)][b];
      if (x.def != leaves[size_t(n.leaf)].max_def)
        disagree(n,
                 fmt::format("definition level {} for a value its parents say is present", x.def));
      return x.value;
    }
    if (n.list_repeated >= 0) return list_of(nodes[size_t(n.list_repeated)], sp, n.list_element);
    Json o = Json::object();
    for (int k : n.kids) o[nodes[size_t(k)].s->name] = value_of(k, sp);
    return o;
  }

  // The array of the repeated node `r`; each element is `element`'s value, or r's own content
  // when element is r or -1.
  Json list_of(const Node& r, const Spans& sp, int element) const {
    Json a = Json::array();
    if (first(r, sp).def < r.def) {
      for (int l = r.leaf_begin; l < r.leaf_end; ++l)
        if (sp[size_t(l)].second - sp[size_t(l)].first != 1)
          disagree(r, "an empty list with more than one entry");
      return a;
    }
    // Each leaf's entries split where one has r's repetition level (a new element).
    std::vector<std::vector<size_t>> starts(size_t(r.leaf_end - r.leaf_begin));
    size_t count = 0;
    for (int l = r.leaf_begin; l < r.leaf_end; ++l) {
      auto& st = starts[size_t(l - r.leaf_begin)];
      const auto [b, e] = sp[size_t(l)];
      if (b >= e) disagree(r, "a list without entries");
      for (size_t i = b; i < e; ++i) {
        const int rep = row[size_t(l)][i].rep;
        if (i > b && rep < r.rep)
          disagree(r, fmt::format("repetition level {} inside a list of level {}", rep, r.rep));
        if (i == b || rep == r.rep) st.push_back(i);
        if (row[size_t(l)][i].def < r.def)
          disagree(r, "an element whose definition level says the list is empty");
      }
      if (l == r.leaf_begin)
        count = st.size();
      else if (st.size() != count)
        disagree(r, fmt::format("{} elements in one leaf column, {} in another", count, st.size()));
    }
    const int self = int(&r - nodes.data());
    Spans sub = sp;
    for (size_t k = 0; k < count; ++k) {
      for (int l = r.leaf_begin; l < r.leaf_end; ++l) {
        const auto& st = starts[size_t(l - r.leaf_begin)];
        sub[size_t(l)] = {st[k], k + 1 < count ? st[k + 1] : sp[size_t(l)].second};
      }
      if (element < 0 || element == self)
        a.push_back(content(self, sub));
      else
        a.push_back(value_of(element, sub));
    }
    return a;
  }
};

ParquetRowReader::ParquetRowReader(const ParquetFile& file) : impl_(std::make_unique<Impl>(file)) {
  impl_->build();
}

ParquetRowReader::~ParquetRowReader() = default;

bool ParquetRowReader::next(std::string& json) {
  Impl& m = *impl_;
  m.row_index = rows_;
  if (!m.read_row()) return false;
  Spans sp(m.leaves.size());
  for (size_t l = 0; l < m.leaves.size(); ++l) sp[l] = {0, m.row[l].size()};
  Json doc = Json::object();
  for (int t : m.top) doc[m.nodes[size_t(t)].s->name] = m.value_of(t, sp);
  json = doc.dump();
  ++rows_;
  return true;
}

}  // namespace marin::data
