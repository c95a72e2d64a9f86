// node hf_reference.mjs text FIXTURE_DIR OUT.jsonl
// node hf_reference.mjs encode CACHE TOKENIZER.json DOCS.jsonl OUT.jsonl [--special]
// node hf_reference.mjs decode CACHE TOKENIZER.json IDS.jsonl OUT.jsonl
// node hf_reference.mjs batch CACHE JOBS.json
// node hf_reference.mjs bench CACHE TOKENIZER.json DOCS.jsonl
// (see hf_reference.sh)
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [cmd, ...args] = process.argv.slice(2);

function readDocs(file) {
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l).text);
}

function loadTokenizer(cache, file) {
  const require = createRequire(path.join(cache, "package.json"));
  const { Tokenizer } = require("tokenizers");
  return Tokenizer.fromFile(file);
}

// ---- the test text: real documents plus cases that stress each pipeline part ----
function makeText(fixture, out) {
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) / (1 << 24);
  const pick = (a) => a[Math.floor(rand() * a.length)];
  const docs = [];
  for (const dir of fs.readdirSync(fixture).sort()) {
    const d = path.join(fixture, dir);
    if (!fs.statSync(d).isDirectory()) continue;
    for (const f of fs.readdirSync(d).sort()) {
      if (!f.endsWith(".jsonl")) continue;
      for (const t of readDocs(path.join(d, f))) docs.push(t.slice(0, 6000));
    }
  }
  const words = [
    "Hello", "world", "The quick brown fox", "naïve café", "Größe", "smörgåsbord", "Ελληνικά",
    "русский язык", "Україна", "日本語のテキスト", "中文文本测试", "한국어 문장", "العربية",
    "עברית", "हिन्दी भाषा", "ภาษาไทย", "Tiếng Việt", "Türkçe", "ქართული", "Հայերեն", "አማርኛ",
    "ﬁ ﬂ ﬃ", "ＦＵＬＬ　ｗｉｄｔｈ１２３", "①②③ ⑳", "x² y³ H₂O", "Å Å Å", "e\u0301 a\u0300 o\u0308",
    "\u1100\u1161\u11a8", "👨‍👩‍👧‍👦", "👍🏽 🏳️‍🌈", "🇺🇸🇯🇵", "<|endoftext|>", "<s>", "</s>",
    "<0x41>", "<unk>", "<|im_start|>", "<think>", "<bos>", "<|begin_of_text|>", "<pad>",
    "1234567890", "3.14159", "1,000,000", "0x7fff", "!!!???...", "---===+++", "«»„“”‘’",
    "\\xff\\xfe\\x00", "İstanbul", "ΣΊΣΥΦΟΣ", "ß ẞ", "ǅ", "\u00a0nbsp\u00a0", "\u200b\u200c\u200d",
    "don't", "I'LL", "we're", "it'S", "tab\tsep", "a\r\nb", "\u2028\u2029", "\u3000ideographic",
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "SELECT * FROM t WHERE a <> b;", "<div class=\"x\">&amp;</div>", "~/.config/marin.toml",
    // more NFKC-sensitive forms: squared and roman-numeral compatibility characters, ellipsis,
    // fractions, superscript letters, the Kelvin and Ohm signs, a precomposed Hangul syllable
    "㍿ ㎏ ㌔", "Ⅻ ⅷ", "…", "½ ¾", "ᵃᵇᶜ ™", "\u212a \u2126", "한",
    // whitespace runs long enough for the BPE's long-piece path (> 256 bytes)
    " ".repeat(300), "\n".repeat(270), "\t ".repeat(140),
  ];
  const spaces = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "    \n", "\u00a0", ""];
  let bytes = docs.reduce((n, t) => n + Buffer.byteLength(t), 0);
  const target = Math.max(2.2e6, bytes + 1.0e6);
  let i = 0;
  while (bytes < target) {
    let t = "";
    const n = 1 + Math.floor(rand() * 60);
    for (let k = 0; k < n; ++k) {
      const r = rand();
      if (r < 0.6) t += pick(words);
      else if (r < 0.7) t += String(Math.floor(rand() * 1e9));
      else if (r < 0.8) { // random characters from varied blocks
        const blocks = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x600, 0x6ff],
          [0x900, 0x97f], [0x3040, 0x30ff], [0x4e00, 0x4fff], [0xac00, 0xad00], [0x1f300, 0x1f64f],
          [0x2000, 0x206f], [0xff00, 0xffef], [0x300, 0x36f], [0x2460, 0x24ff]];
        const [a, b] = pick(blocks);
        for (let c = 0; c < 1 + rand() * 8; ++c) t += String.fromCodePoint(a + Math.floor(rand() * (b - a)));
      } else t += pick(spaces).repeat(1 + Math.floor(rand() * 3));
      t += pick(spaces);
    }
    if (i % 7 === 0) t = pick(words) + t;  // documents that start with special-looking text
    if (i % 11 === 0) t = " " + t;
    docs.push(t);
    bytes += Buffer.byteLength(t);
    ++i;
  }
  fs.writeFileSync(out, docs.map((t) => JSON.stringify({ text: t })).join("\n") + "\n");
}

async function encode(cache, file, docsFile, out, special) {
  const tok = loadTokenizer(cache, file);
  const docs = readDocs(docsFile);
  const lines = [];
  for (let i = 0; i < docs.length; i += 256) {
    const encs = await tok.encodeBatch(docs.slice(i, i + 256), { addSpecialTokens: special });
    for (const e of encs) lines.push(JSON.stringify(Array.from(e.getIds())));
  }
  fs.writeFileSync(out, lines.join("\n") + "\n");
}

// Rust's decode (special tokens kept) of each line's ids: the normalized text the decoder gives.
async function decode(cache, file, idsFile, out) {
  const tok = loadTokenizer(cache, file);
  const ids = fs.readFileSync(idsFile, "utf8").split("\n").filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
  const lines = [];
  for (const x of ids) lines.push(JSON.stringify(await tok.decode(x, false)));
  fs.writeFileSync(out, lines.join("\n") + "\n");
}

// Several tokenizers in one process (node and the binding start once): JOBS.json is an array of
// {"tokenizer": FILE, "docs": DOCS.jsonl, "ids": OUT.jsonl, "decoded": OUT.jsonl, "special": bool};
// each job writes its ids (as encode) and Rust's decode of them (as decode).
async function batch(cache, jobsFile) {
  for (const job of JSON.parse(fs.readFileSync(jobsFile, "utf8"))) {
    const tok = loadTokenizer(cache, job.tokenizer);
    const ids = [];
    for (const d of readDocs(job.docs)) {
      const e = await tok.encode(d, null, { addSpecialTokens: job.special });
      ids.push(Array.from(e.getIds()));
    }
    const decoded = [];
    for (const x of ids) decoded.push(JSON.stringify(await tok.decode(x, false)));
    fs.writeFileSync(job.decoded, decoded.join("\n") + "\n");
    fs.writeFileSync(job.ids, ids.map((x) => JSON.stringify(x)).join("\n") + "\n");
  }
}

async function bench(cache, file, docsFile) {
  const tok = loadTokenizer(cache, file);
  const docs = readDocs(docsFile);
  const mb = docs.reduce((n, t) => n + Buffer.byteLength(t), 0) / 1e6;
  const rates = [], cpuRates = [];
  for (let run = 0; run < 5; ++run) {
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    for (const d of docs) await tok.encode(d, null, { addSpecialTokens: false });
    rates.push(mb / (Number(process.hrtime.bigint() - t0) / 1e9));
    const c = process.cpuUsage(c0);  // every thread of the process: Node's and the binding's
    cpuRates.push(mb / ((c.user + c.system) / 1e6));
  }
  rates.sort((a, b) => a - b);
  cpuRates.sort((a, b) => a - b);
  console.log(rates[2].toFixed(3));
  console.error(`${mb.toFixed(1)} MB; median MB/s of wall time ${rates[2].toFixed(3)}, ` +
    `of the process's CPU time ${cpuRates[2].toFixed(3)}`);
  // The same through encodeBatch, 256 documents a call (RAYON_NUM_THREADS=1: one encoding thread),
  // so Node's per-call cost is paid once per 256 documents: stderr only, 3 runs.
  const batchRates = [], batchCpu = [];
  for (let run = 0; run < 3; ++run) {
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    for (let i = 0; i < docs.length; i += 256)
      await tok.encodeBatch(docs.slice(i, i + 256), { addSpecialTokens: false });
    batchRates.push(mb / (Number(process.hrtime.bigint() - t0) / 1e9));
    const c = process.cpuUsage(c0);
    batchCpu.push(mb / ((c.user + c.system) / 1e6));
  }
  batchRates.sort((a, b) => a - b);
  batchCpu.sort((a, b) => a - b);
  console.error(`encodeBatch of 256: median MB/s of wall time ${batchRates[1].toFixed(3)}, ` +
    `of the process's CPU time ${batchCpu[1].toFixed(3)}`);
}

if (cmd === "text") makeText(args[0], args[1]);
else if (cmd === "encode") await encode(args[0], args[1], args[2], args[3], args[4] === "--special");
else if (cmd === "decode") await decode(args[0], args[1], args[2], args[3]);
else if (cmd === "batch") await batch(args[0], args[1]);
else if (cmd === "bench") await bench(args[0], args[1], args[2]);
else { console.error("see hf_reference.sh"); process.exit(2); }
