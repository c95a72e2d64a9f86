// A rendered task file (the JSONL that scripts/render_tasks.py writes: a header line, then one
// line per document) as `marin eval --tasks FILE.jsonl` reads it (read_task_items, which also
// reads a generate_until header's generation fields).
#include "eval/tasks/task_items.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = marin::fuzz;
  fz::refuse_or_accept([&] {
    const std::string path = fz::input_file("task.rendered.jsonl", fz::as_text(data, size));
    (void)marin::eval::read_task_items(path);
  });
  return 0;
}
