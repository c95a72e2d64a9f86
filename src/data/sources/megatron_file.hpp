// Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx), as megatron/core/datasets/
// indexed_dataset.py's IndexedDatasetBuilder and _IndexWriter write them. The .idx, little-endian:
//   0   char[9]  "MMIDIDX\0\0"
//   9   u64      version, 1
//   17  u8       dtype code of the tokens: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                6 float64, 7 float32, 8 uint16 (Megatron's DType table)
//   18  u64      sequence count S
//   26  u64      document count D + 1 (the document index starts with 0)
//   34  i32[S]   sequence lengths in tokens
//       i64[S]   sequence pointers: byte offsets into the .bin
//       i64[D+1] document index: document d is sequences [idx[d], idx[d+1]); idx[0] = 0,
//                idx[D] = S
//       i8[S]    sequence modes, only in multimodal datasets (read past, not used)
// The .bin holds the tokens in that dtype; a document with several sequences (sentence-split
// preprocessing) is their concatenation.
#pragma once

#include <cstdint>
#include <string>

#include "data/sources/token_import_reader.hpp"

namespace marin::data {

struct MegatronPaths {
  std::string idx, bin;
};
// The pair of an input named PREFIX, PREFIX.bin or PREFIX.idx; marin::Error naming the input
// when either file is missing.
MegatronPaths megatron_paths(const std::string& input);

struct MegatronIndex {
  static constexpr uint64_t kHeaderBytes = 34;
  uint8_t dtype = 0;
  uint32_t token_bytes = 0;
  uint64_t sequences = 0, documents = 0;
  bool modes = false;  // multimodal: S trailing mode bytes
};

// The .idx's header, checked: magic, version, dtype code, and counts whose arrays fill the file
// exactly (or with the multimodal mode bytes). marin::Error naming the file, field and offset.
MegatronIndex read_megatron_header(FileWindow& idx);

// Reads the dataset and hands each document to `sink`, in index order. Checks, with errors naming
// the file and the byte offset: the document index runs from 0 to S without decreasing, no
// sequence length or pointer is negative, every sequence lies inside the .bin, and every token
// is an id of `vocab` (its index in the .bin counted in tokens of the dtype, and its byte
// offset); a float dtype's value must be a whole number.
void read_megatron(const MegatronPaths& paths, const TokenVocab& vocab, const DocumentSink& sink,
                   const BytesRead& progress = {});

}  // namespace marin::data
