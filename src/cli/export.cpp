// marin export / marin import: a checkpoint to the Hugging Face layout with a PyTorch modeling
// file, and back (src/export/hf_export.hpp, docs/export.md).
#include <fmt/core.h>

#include "cli/options.hpp"
#include "export/hf_export.hpp"

namespace marin::cli {
namespace {

struct ExportOptions {
  std::string checkpoint, out, format = "hf";
  hf::ExportOptions hf;
};

int run_export(const ExportOptions& o) {
  const hf::ExportSummary s = hf::export_hf(o.checkpoint, o.out, o.hf);
  fmt::print("wrote {} ({} tensors, {} bytes of {} weights in {} shard{}{})\n", o.out, s.tensors,
             s.bytes, o.hf.dtype, s.shards, s.shards == 1 ? "" : "s",
             s.tokenizer ? ", tokenizer" : ", no tokenizer: give --tokenizer");
  fmt::print(
      "load it: MarinForCausalLM.from_pretrained(\"{}\") from {}/modeling_marin.py, or\n"
      "  transformers.AutoModelForCausalLM.from_pretrained(\"{}\", trust_remote_code=True)\n",
      o.out, o.out, o.out);
  return 0;
}

struct ImportOptions {
  std::string dir, out, format = "hf";
};

const auto kFormats = CLI::IsMember({"hf"});

}  // namespace

MARIN_COMMAND(
    export_, "export", "Export a checkpoint to the Hugging Face layout (+ PyTorch model)",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<ExportOptions>();
      app.add_option("--checkpoint", o->checkpoint, "model checkpoint directory")->required();
      app.add_option("--format", o->format, "export format")
          ->capture_default_str()
          ->check(kFormats);
      app.add_option("--out", o->out, "directory to create (must not hold files)")->required();
      app.add_option("--dtype", o->hf.dtype, "weight dtype: fp32 or bf16")
          ->capture_default_str()
          ->check(CLI::IsMember({"fp32", "bf16"}));
      app.add_option("--bf16-overflow", o->hf.bf16_overflow,
                     "a finite weight beyond bf16's range: error (naming the tensor) or "
                     "saturate (the largest finite bf16)")
          ->capture_default_str()
          ->check(CLI::IsMember({"error", "saturate"}));
      app.add_option("--tokenizer", o->hf.tokenizer,
                     "tokenizer.json or .tiktoken (default: the checkpoint's "
                     "tokenizer.json when present)");
      app.add_option("--max-shard-bytes", o->hf.max_shard_bytes,
                     "split model.safetensors into shards of at most this many bytes "
                     "(+ model.safetensors.index.json)")
          ->capture_default_str()
          ->check(in_range<int64_t>(1, INT64_MAX));
      return [o] { return run_export(*o); };
    });

MARIN_COMMAND(
    import_, "import", "Import a Hugging Face export back into a checkpoint",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<ImportOptions>();
      app.add_option("dir", o->dir, "the export directory (marin export --format hf)")->required();
      app.add_option("--format", o->format, "format of the directory")
          ->capture_default_str()
          ->check(kFormats);
      app.add_option("--out", o->out, "checkpoint directory to create")->required();
      return [o] {
        hf::import_hf(o->dir, o->out);
        fmt::print("wrote {}/config.json and {}/model.safetensors\n", o->out, o->out);
        return 0;
      };
    });

}  // namespace marin::cli
