// Parquet files as a DocumentSource (document_source.hpp): one document per row of the
// top-level BYTE_ARRAY column --text-field (default `text`); rows whose text is null are skipped
// and counted ("null text"); --id-field, if given, names another top-level BYTE_ARRAY column.
#pragma once

#include "data/sources/document_source.hpp"

namespace marin::data {

SourceFormat parquet_format();

}  // namespace marin::data
