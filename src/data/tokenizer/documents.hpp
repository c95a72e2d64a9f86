#pragma once
// Reading training/benchmark text through the document seam (data/sources/document_source.hpp):
// a `.jsonl` file (compressed or not, by magic number) is one document per non-blank line, its
// text at `text_field`; a directory is walked recursively; a text file is one document. A
// compressed or binary file is never read as raw text.
#include <string>
#include <vector>

namespace marin {

// Appends the documents of `path` (a file, directory or glob); throws marin::Error naming the
// file (and line) on a problem. A file named on its own whose name is no known format is read as
// one text document (as before); inside a directory it is passed over.
void read_documents(const std::string& path, std::vector<std::string>& docs,
                    const std::string& text_field = "text");
std::vector<std::string> read_documents(const std::vector<std::string>& paths,
                                        const std::string& text_field = "text");

}  // namespace marin
