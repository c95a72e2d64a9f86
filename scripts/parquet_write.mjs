// Writes the Parquet test files of tests/test_parquet.cpp with two real writers: the Rust
// `parquet` crate (npm parquet-wasm, fed an Apache Arrow table from npm apache-arrow) and
// hyparquet-writer (JavaScript). Run through scripts/parquet_write.sh, which installs them.
//
//   node parquet_write.mjs CACHE IN.jsonl OUTDIR [bench]
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

// Mode "task" (tests/test_harness_tasks.cpp, Parquet task data): hyparquet-writer's
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
