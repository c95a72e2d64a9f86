#pragma once
// Whole-file I/O with errors that name the file. Writes are atomic: a reader (or a crash) sees
// either the old file or the complete new one, never a partial file.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace marin {

// Writes the concatenation of `parts` to `path.tmp.<pid>`, fsyncs it, renames it over `path` and
// fsyncs the directory. On any failure the temporary file is removed, `path` is left as it was,
// and marin::Error names the file and the system error. A `path` that exists and is not a
// regular file (a device, a FIFO, a socket; also through a link such as /dev/stdout) is written
// in place and never replaced; a directory is refused.
void write_file_atomic(const std::string& path, std::span<const std::string_view> parts);
void write_file_atomic(const std::string& path, std::string_view bytes);

// Opens an input file for reading and returns its descriptor (the caller closes it). Anything
// but a regular file (a FIFO, a directory, a device, a socket) is refused with marin::Error
// naming the file and what it is, without blocking: a FIFO is opened O_NONBLOCK and checked
// with fstat before anything is read. Every reader of input files goes through this.
int open_input(const std::string& path);

// The whole file (open_input, then read); marin::Error naming the file if it cannot be opened
// or read, or is not a regular file.
std::string read_file(const std::string& path);

// xxh64_hex (core/hash.hpp) of a file's bytes, read a piece at a time: a checkpoint's 160 MB
// optimizer file is hashed without holding it in memory.
std::string xxh64_file_hex(const std::string& path);

// The lines of a text, without their '\n' (a final line without one counts; nothing follows a
// final '\n'). Views into `text`, which must outlive them.
std::vector<std::string_view> split_lines(std::string_view text);

}  // namespace marin
