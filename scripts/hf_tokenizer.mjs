// node hf_tokenizer.mjs CACHE_DIR EXPORT_DIR DOCS.jsonl OUT.jsonl (see hf_tokenizer.sh)
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [cache, dir, docs, out] = process.argv.slice(2);
const entry = path.join(cache, "node_modules/@huggingface/tokenizers/dist/tokenizers.mjs");
const { Tokenizer } = await import(pathToFileURL(entry).href);
const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(json, config);
const fd = fs.openSync(out, "w");
for (const line of fs.readFileSync(docs, "utf8").split("\n")) {
  if (line.trim() === "") continue;
  const { ids } = tok.encode(JSON.parse(line).text, { add_special_tokens: false });
  fs.writeSync(fd, JSON.stringify({ ids: Array.from(ids) }) + "\n");
}
fs.closeSync(fd);
