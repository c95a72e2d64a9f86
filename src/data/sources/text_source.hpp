// Plain text files: one file is one document, its (decoded) bytes as they are.
#pragma once

#include "data/sources/document_source.hpp"

namespace marin::data {

SourceFormat text_format();

}  // namespace marin::data
