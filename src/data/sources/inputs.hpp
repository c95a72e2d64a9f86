// The input files named on a command line (`--in PATH...`): a file, a directory (walked
// recursively, in sorted order, symlinked directories not followed) or a glob. Each file keeps
// the root it was found under, for `--domain-from dir` and Hub split names.
#pragma once

#include <string>
#include <vector>

namespace marin::data {

struct InputFile {
  std::string path;  // as opened
  std::string root;  // the directory named on the command line (empty for a file or glob hit)
  std::string rel;   // the path below the root (the file name for a file or glob hit)
};

struct InputList {
  std::vector<InputFile> files;  // regular files, in order
  // Everything met that is not a regular file, with why: "a/b: symlink loop", "p: a FIFO".
  std::vector<std::string> rejected;
};

// The files of `paths`. A path that names nothing (and is no glob matching anything) is a
// marin::Error naming it.
InputList list_inputs(const std::vector<std::string>& paths);

// The split a Hub layout's file name or directory gives a file ("train", "valid" for
// validation/valid/dev, "test"), or "" when none: data/train-00000-of-00002.jsonl.zst -> train.
std::string hub_split(const std::string& rel);

}  // namespace marin::data
