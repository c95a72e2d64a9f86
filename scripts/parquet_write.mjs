// Writes the Parquet test files of tests/data/test_parquet.cpp with two real writers: the Rust
// `parquet` crate (npm parquet-wasm, fed an Apache Arrow table from npm apache-arrow) and
// hyparquet-writer (JavaScript). Run through scripts/parquet_write.sh, which installs them.
//
//   node parquet_write.mjs CACHE IN.jsonl OUTDIR [bench|task|cols]
//
// IN.jsonl holds one {"text": string|null} per line. Every file has the columns
//   text  BYTE_ARRAY STRING, OPTIONAL: the texts, nulls included
//   req   BYTE_ARRAY STRING, REQUIRED: the texts, a null written as ""
//   n     INT32: the line number (a column of another type)
// and is named WRITER-CODEC-PAGEVERSION-ENCODING.parquet. OUTDIR/files.txt lists them, one per
// line. Small row groups and pages, so that every file has several of each. With `bench`, only
// rust-snappy-v1-plain and rust-zstd-v1-plain, in row groups of 2^20 rows and 1 MiB pages.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const [cache, inPath, outDir, mode] = process.argv.slice(2);
const require = createRequire(path.join(cache, 'node_modules', 'x.js'));
const arrow = require('apache-arrow');
const wasm = require('parquet-wasm/node');
const { parquetWriteBuffer } = await import(
  path.join(cache, 'node_modules', 'hyparquet-writer', 'src', 'index.js'));

const texts = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length > 0)
  .map((l) => JSON.parse(l).text);
fs.mkdirSync(outDir, { recursive: true });
const written = [];
const bench = mode === 'bench' || mode?.endsWith(':bench');
const rowGroup = bench ? 1 << 20 : 8;
const pageBytes = bench ? 1 << 20 : 1024;

function save(name, bytes) {
  fs.writeFileSync(path.join(outDir, name), bytes);
  written.push(name);
}

// Mode "task" (tests/eval/test_harness_tasks.cpp, Parquet task data): hyparquet-writer's
// task.parquet with the string columns text and req only, and task-int.parquet with n too.
if (mode === 'task') {
  const cols = (withInt) => [
    { name: 'text', data: texts, type: 'STRING', nullable: true },
    { name: 'req', data: texts.map((t) => t ?? ''), type: 'STRING', nullable: false },
    ...(withInt ? [{ name: 'n', data: Int32Array.from(texts.map((_, i) => i)), type: 'INT32',
      nullable: false }] : []),
  ];
  for (const [name, withInt] of [['task.parquet', false], ['task-int.parquet', true]])
    save(name, new Uint8Array(parquetWriteBuffer({ columnData: cols(withInt), codec: 'SNAPPY',
      rowGroupSize: 2, pageSize: 64 })));
  fs.writeFileSync(path.join(outDir, 'files.txt'), written.join('\n') + '\n');
  process.exit(0);
}

// Mode "cols" (tests/data/test_parquet.cpp, tests/eval/test_harness_tasks.cpp: columns of every type
// task data has): fixed rows (IN.jsonl is not read) with
//   question STRING (nulls), answer INT64, n32 INT32 (nulls), flag BOOLEAN (nulls), score DOUBLE
//   (nulls), f32 FLOAT, choices list<string> (null lists, empty lists, null elements),
//   nums list<int64>, arc struct{text: list<string>, label: list<string>} (nulls: ARC's layout),
//   pairs list<struct{k: string, v: int32}> (null elements and null fields)
// from both writers (each with v1 and v2 data pages, dictionary and PLAIN, where it has them),
// written as cols-WRITER-VERSION-ENCODING.parquet, small pages and row groups of 3 rows; and
// OUTDIR/expected.jsonl, each row as JSON (what the `datasets` library gives); and an MMLU-like
// split from each writer, mmlu-rust.parquet and mmlu-hyparquet.parquet, and refused-hyparquet.parquet
// with types the reader refuses (neither in files.txt).
if (mode === 'cols' || mode?.startsWith('cols:')) {
  const rows = [
    { question: 'Q0?', answer: 0n, n32: 1, flag: true, score: 0.5, f32: 0.5,
      choices: ['a', 'b', 'c', 'd'], nums: [1n, 2n], arc: { text: ['x', 'y'], label: ['A', 'B'] },
      pairs: [{ k: 'p', v: 1 }, { k: null, v: 2 }] },
    { question: null, answer: -5n, n32: null, flag: false, score: null, f32: -2,
      choices: [], nums: [], arc: { text: [], label: [] }, pairs: [] },
    { question: 'caf\u00e9', answer: 9007199254740993n, n32: -7, flag: null, score: -1.25,
      f32: 1.25, choices: null, nums: null, arc: null, pairs: null },
    { question: '', answer: 3n, n32: 2147483647, flag: true, score: 1e300, f32: 0,
      choices: ['x', null, 'z'], nums: [3000000000n, -1n], arc: { text: ['only'], label: ['1'] },
      pairs: [null, { k: 'r', v: null }] },
  ];
  for (let i = 4; i < 11; ++i)
    rows.push({ question: `q${i}`, answer: BigInt(i), n32: i, flag: i % 2 === 0, score: i / 4,
      f32: i / 2, choices: Array.from({ length: i % 5 }, (_, k) => `c${i}-${k}`),
      nums: [BigInt(i), BigInt(i * i)], arc: { text: [`t${i}`], label: [`L${i}`] },
      pairs: [{ k: `k${i}`, v: i }] });
  const names = ['question', 'answer', 'n32', 'flag', 'score', 'f32', 'choices', 'nums', 'arc',
    'pairs'];
  // An MMLU-like split (question, subject, choices list<string>, answer int64): mmlu-WRITER.
  const mmlu = [
    { question: 'What is 2 + 2?', subject: 'math', choices: ['3', '4', '5', '22'], answer: 1n },
    { question: 'The capital of France?', subject: 'geo', choices: ['Paris', 'Rome', 'Oslo',
      'Bern'], answer: 0n },
    { question: 'Water boils at (C)?', subject: 'physics', choices: ['50', '75', '90', '100'],
      answer: 3n },
  ];
  if (mode === 'cols') {
    const big = (_, v) => (typeof v === 'bigint' ? `__big__${v}` : v);
    fs.writeFileSync(path.join(outDir, 'expected.jsonl'), rows.map((r) =>
      JSON.stringify(r, big).replace(/"__big__(-?\d+)"/g, '$1')).join('\n') + '\n');
    // The Rust writer, one child process a file (see rust() below).
    for (const version of ['v1', 'v2'])
      for (const encoding of ['dict', 'plain']) {
        const name = `cols-rust-${version}-${encoding}.parquet`;
        execFileSync(process.execPath, [process.argv[1], cache, inPath, outDir,
          `cols:${version}:${encoding}:${name}`], { stdio: 'inherit' });
        written.push(name);
      }
    // hyparquet-writer: data pages v2; a schema of its own (3-level lists).
    const list = (name, leaf, optional = true) => [
      { name, repetition_type: optional ? 'OPTIONAL' : 'REQUIRED', num_children: 1,
        converted_type: 'LIST', logical_type: { type: 'LIST' } },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', repetition_type: 'OPTIONAL', ...leaf },
    ];
    const str = { type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' } };
    const schema = [
      { name: 'root', num_children: names.length },
      { name: 'question', repetition_type: 'OPTIONAL', ...str },
      { name: 'answer', repetition_type: 'REQUIRED', type: 'INT64' },
      { name: 'n32', repetition_type: 'OPTIONAL', type: 'INT32' },
      { name: 'flag', repetition_type: 'OPTIONAL', type: 'BOOLEAN' },
      { name: 'score', repetition_type: 'OPTIONAL', type: 'DOUBLE' },
      { name: 'f32', repetition_type: 'REQUIRED', type: 'FLOAT' },
      ...list('choices', str),
      ...list('nums', { type: 'INT64' }),
      { name: 'arc', repetition_type: 'OPTIONAL', num_children: 2 },
      ...list('text', str, false),
      ...list('label', str, false),
      { name: 'pairs', repetition_type: 'OPTIONAL', num_children: 1, converted_type: 'LIST' },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', repetition_type: 'OPTIONAL', num_children: 2 },
      { name: 'k', repetition_type: 'OPTIONAL', ...str },
      { name: 'v', repetition_type: 'OPTIONAL', type: 'INT32' },
    ];
    execFileSync(process.execPath, [process.argv[1], cache, inPath, outDir,
      'cols:v1:mmlu:mmlu-rust.parquet'], { stdio: 'inherit' });
    save('mmlu-hyparquet.parquet', new Uint8Array(parquetWriteBuffer({
      columnData: ['question', 'subject', 'choices', 'answer'].map((n) => ({ name: n,
        data: mmlu.map((r) => r[n]) })),
      schema: [{ name: 'root', num_children: 4 },
        { name: 'question', repetition_type: 'OPTIONAL', ...str },
        { name: 'subject', repetition_type: 'OPTIONAL', ...str },
        ...list('choices', str), { name: 'answer', repetition_type: 'OPTIONAL', type: 'INT64' }],
      codec: 'SNAPPY' })));
    written.pop();  // (mmlu-*.parquet are not in files.txt)
    // Types the reader refuses: an INT32 DATE and an INT64 TIMESTAMP (refused-hyparquet.parquet).
    save('refused-hyparquet.parquet', new Uint8Array(parquetWriteBuffer({
      columnData: [{ name: 'ok', data: ['a', 'b'] }, { name: 'day', data: [1, 2] },
        { name: 'ts', data: [1n, 2n] }],
      schema: [{ name: 'root', num_children: 3 }, { name: 'ok', repetition_type: 'REQUIRED', ...str },
        { name: 'day', repetition_type: 'REQUIRED', type: 'INT32', converted_type: 'DATE' },
        { name: 'ts', repetition_type: 'REQUIRED', type: 'INT64',
          converted_type: 'TIMESTAMP_MILLIS' }] })));
    written.pop();
    for (const encoding of ['RLE_DICTIONARY', 'PLAIN']) {
      const columnData = names.map((n) => ({ name: n, data: rows.map((r) => r[n]), encoding }));
      const name = `cols-hyparquet-v2-${encoding === 'PLAIN' ? 'plain' : 'dict'}.parquet`;
      save(name, new Uint8Array(parquetWriteBuffer({ columnData, schema, codec: 'SNAPPY',
        rowGroupSize: 3, pageSize: 64 })));
    }
    fs.writeFileSync(path.join(outDir, 'files.txt'), written.join('\n') + '\n');
    process.exit(0);
  }
  const [, version, encoding, name] = mode.split(':');
  const strList = new arrow.List(new arrow.Field('item', new arrow.Utf8(), true));
  const fields = encoding === 'mmlu' ? [
    new arrow.Field('question', new arrow.Utf8(), true),
    new arrow.Field('subject', new arrow.Utf8(), true),
    new arrow.Field('choices', strList, true),
    new arrow.Field('answer', new arrow.Int64(), true),
  ] : [
    new arrow.Field('question', new arrow.Utf8(), true),
    new arrow.Field('answer', new arrow.Int64(), false),
    new arrow.Field('n32', new arrow.Int32(), true),
    new arrow.Field('flag', new arrow.Bool(), true),
    new arrow.Field('score', new arrow.Float64(), true),
    new arrow.Field('f32', new arrow.Float32(), false),
    new arrow.Field('choices', strList, true),
    new arrow.Field('nums', new arrow.List(new arrow.Field('item', new arrow.Int64(), true)), true),
    new arrow.Field('arc', new arrow.Struct([new arrow.Field('text', strList, false),
      new arrow.Field('label', strList, false)]), true),
    new arrow.Field('pairs', new arrow.List(new arrow.Field('item', new arrow.Struct([
      new arrow.Field('k', new arrow.Utf8(), true), new arrow.Field('v', new arrow.Int32(), true),
    ]), true)), true),
  ];
  const colsSchema = new arrow.Schema(fields);
  const data = encoding === 'mmlu' ? mmlu : rows;
  const vectors = fields.map((f) => arrow.vectorFromArray(data.map((r) => r[f.name]), f.type));
  const colsBatch = new arrow.RecordBatch(colsSchema, arrow.makeData({
    type: new arrow.Struct(colsSchema.fields), length: data.length, nullCount: 0,
    children: vectors.map((v) => v.data[0]),
  }));
  let b = new wasm.WriterPropertiesBuilder()
    .setCompression(wasm.Compression.SNAPPY)
    .setWriterVersion(version === 'v2' ? wasm.WriterVersion.V2 : wasm.WriterVersion.V1)
    .setMaxRowGroupSize(3)
    .setDataPageSizeLimit(64)
    .setWriteBatchSize(2)
    .setDictionaryEnabled(encoding === 'dict');
  if (encoding === 'plain') b = b.setEncoding(wasm.Encoding.PLAIN);
  const bytes = wasm.writeParquet(
    wasm.Table.fromIPCStream(arrow.tableToIPC(new arrow.Table([colsBatch]), 'stream')), b.build());
  fs.writeFileSync(path.join(outDir, name), bytes);
  process.exit(0);
}

// --- Rust parquet (parquet-wasm) ---
const schema = new arrow.Schema([
  new arrow.Field('text', new arrow.Utf8(), true),
  new arrow.Field('req', new arrow.Utf8(), false),
  new arrow.Field('n', new arrow.Int32(), false),
]);
const columns = [
  arrow.vectorFromArray(texts, new arrow.Utf8()),
  arrow.vectorFromArray(texts.map((t) => t ?? ''), new arrow.Utf8()),
  arrow.vectorFromArray(texts.map((_, i) => i), new arrow.Int32()),
];
const batch = new arrow.RecordBatch(schema, arrow.makeData({
  type: new arrow.Struct(schema.fields), length: texts.length, nullCount: 0,
  children: columns.map((c) => c.data[0]),
}));
const ipc = arrow.tableToIPC(new arrow.Table([batch]), 'stream');

// parquet-wasm 0.8.0 panics ("unreachable") on a later writeParquet in the same process, so
// each Rust file is written by a child process of this script (mode "rust:CODEC:VERSION:ENC").
function rust(codecName, version, encoding) {
  const name = `rust-${codecName.toLowerCase()}-${version}-${encoding}.parquet`;
  if (!mode?.startsWith('rust:')) {
    execFileSync(process.execPath, [process.argv[1], cache, inPath, outDir,
      `rust:${codecName}:${version}:${encoding}:${bench ? 'bench' : ''}`], { stdio: 'inherit' });
    written.push(name);
    return;
  }
  let b = new wasm.WriterPropertiesBuilder()
    .setCompression(wasm.Compression[codecName])
    .setWriterVersion(version === 'v2' ? wasm.WriterVersion.V2 : wasm.WriterVersion.V1)
    .setMaxRowGroupSize(rowGroup)
    .setDataPageSizeLimit(pageBytes)
    .setWriteBatchSize(bench ? 1024 : 2);
  if (encoding === 'dict') {
    b = b.setDictionaryEnabled(true);
  } else {
    b = b.setDictionaryEnabled(false);
    if (encoding === 'plain') b = b.setEncoding(wasm.Encoding.PLAIN);
    if (encoding === 'delta') {  // the text columns only (the INT32 column cannot have it)
      b = b.setColumnEncoding('text', wasm.Encoding.DELTA_BYTE_ARRAY)
        .setColumnEncoding('req', wasm.Encoding.DELTA_BYTE_ARRAY);
    }
  }
  const bytes = wasm.writeParquet(wasm.Table.fromIPCStream(ipc), b.build());
  fs.writeFileSync(path.join(outDir, name), bytes);
}

if (mode?.startsWith('rust:')) {
  const [, codec, version, encoding] = mode.split(':');
  rust(codec, version, encoding);
  process.exit(0);
} else if (bench) {
  rust('SNAPPY', 'v1', 'plain');
  rust('ZSTD', 'v1', 'plain');
} else {
  for (const codec of ['UNCOMPRESSED', 'SNAPPY', 'GZIP', 'ZSTD'])
    for (const version of ['v1', 'v2'])
      for (const encoding of ['dict', 'plain']) rust(codec, version, encoding);
  // Refused: an encoding and a codec the reader does not support.
  rust('SNAPPY', 'v2', 'delta');
  rust('LZ4_RAW', 'v1', 'plain');
  rust('BROTLI', 'v1', 'plain');

  // --- hyparquet-writer: data pages v2 only; GZIP through node's zlib, ZSTD through the zstd
  // command (libzstd), as hyparquet-writer takes the compressors of codecs beyond SNAPPY. ---
  const compressors = {
    GZIP: (bytes) => new Uint8Array(zlib.gzipSync(bytes)),
    ZSTD: (bytes) => new Uint8Array(execFileSync('zstd', ['-q', '-c', '-3'], { input: bytes })),
  };
  const hy = (codec, encoding) => {
    const columnData = [
      { name: 'text', data: texts, type: 'STRING', nullable: true },
      { name: 'req', data: texts.map((t) => t ?? ''), type: 'STRING', nullable: false },
      { name: 'n', data: Int32Array.from(texts.map((_, i) => i)), type: 'INT32', nullable: false },
    ];
    if (encoding !== 'auto') for (const c of columnData.slice(0, 2)) c.encoding = encoding;
    const bytes = parquetWriteBuffer({
      columnData, codec, compressors, rowGroupSize: rowGroup, pageSize: pageBytes,
    });
    const tag = { RLE_DICTIONARY: 'dict', PLAIN: 'plain', DELTA_BYTE_ARRAY: 'delta',
      DELTA_LENGTH_BYTE_ARRAY: 'deltalength' }[encoding];
    save(`hyparquet-${codec.toLowerCase()}-v2-${tag}.parquet`, new Uint8Array(bytes));
  };
  const haveZstd = (() => {
    try { execFileSync('zstd', ['--version']); return true; } catch { return false; }
  })();
  for (const codec of ['UNCOMPRESSED', 'SNAPPY', 'GZIP', ...(haveZstd ? ['ZSTD'] : [])])
    for (const encoding of ['RLE_DICTIONARY', 'PLAIN']) hy(codec, encoding);
  hy('SNAPPY', 'DELTA_LENGTH_BYTE_ARRAY');
}
fs.writeFileSync(path.join(outDir, 'files.txt'), written.join('\n') + '\n');
