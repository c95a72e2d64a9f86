#include "data/tokenizer/documents.hpp"

#include "core/error.hpp"
#include "data/sources/document_source.hpp"
#include "data/sources/inputs.hpp"

namespace marin {

void read_documents(const std::string& path, std::vector<std::string>& docs,
                    const std::string& text_field) {
  data::SourceOptions o;
  o.text_field = text_field;
  const data::InputList inputs = data::list_inputs({path});
  size_t read = 0;
  for (const data::InputFile& f : inputs.files) {
    std::string why;
    std::string_view format = "auto";
    if (!data::detect_format(f.path, why)) {
      if (!f.root.empty()) continue;  // a directory's other files
      format = "text";                // a file named on its own: its bytes, decoded
    }
    std::unique_ptr<data::DocumentSource> src = data::open_source(f.path, format, o);
    data::Document d;
    while (src->next(d)) docs.push_back(std::move(d.text));
    ++read;
  }
  if (read == 0) fail("{}: no readable documents (no .jsonl/.txt/.md files found)", path);
}

std::vector<std::string> read_documents(const std::vector<std::string>& paths,
                                        const std::string& text_field) {
  std::vector<std::string> docs;
  for (const auto& p : paths) read_documents(p, docs, text_field);
  return docs;
}

}  // namespace marin
