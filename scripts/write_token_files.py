#!/usr/bin/python3
"""Writes llm.c and Megatron-LM token files the way those projects write them, for the tests of
`marin tokenize --format llmc|megatron` (tests/data/test_token_import.cpp). numpy only.

The documents come from a marin token shard (docs/data.md's layout: each document its ids, then
the tokenizer's EOS, which is stripped here: --eos ID) or from a JSON list of id lists.

  write_token_files.py llmc OUT --from SHARD.tok --eos ID [--version 1|7] [--bos ID]
                       [--shard-size N]
      llm.c's dev/data/fineweb.py + data_common.py write_datafile: every document is written as
      <delimiter> + ids (version 1: <|endoftext|> = --eos, uint16; version 7: <|begin_of_text|> =
      --bos, uint32) into one token stream; with --shard-size N the stream is cut every N tokens,
      mid-document as fineweb.py does, into OUT_000000.bin, OUT_000001.bin, ...; else OUT.
  write_token_files.py megatron PREFIX --from SHARD.tok --eos ID [--dtype NAME] [--no-eod]
                       [--sentences K]
      Megatron-LM's tools/preprocess_data.py through megatron/core/datasets/indexed_dataset.py's
      IndexedDatasetBuilder: each document split into up to K "sentences" (sequences), the EOD
      (--eos) appended to its last one unless --no-eod (preprocess_data.py's --append-eod),
      add_document(ids, lengths), then finalize: PREFIX.bin and PREFIX.idx. --dtype defaults to
      DType.optimal_dtype(vocab): uint16 below 65500 ids, else int32.
"""
import argparse
import json
import struct

import numpy as np


def shard_documents(path, eos):
    """The documents of a marin token shard, each without its final EOS."""
    head = np.fromfile(path, np.uint64, 8)
    n_docs, n_tokens = int(head[4]), int(head[5])
    width = int(np.fromfile(path, np.uint32, 4)[3])
    off = np.fromfile(path, np.uint64, n_docs + 1, offset=64)
    tok = np.fromfile(path, np.uint16 if width == 2 else np.uint32, n_tokens,
                      offset=64 + 8 * (n_docs + 1))
    docs = []
    for d in range(n_docs):
        ids = [int(t) for t in tok[int(off[d]):int(off[d + 1])]]
        assert ids and ids[-1] == eos, f"document {d} of {path} does not end in EOS {eos}"
        docs.append(ids[:-1])
    return docs


# ---- llm.c: dev/data/data_common.py ------------------------------------------------------------

HEADERS_INFO = {
    1: {"magic": 20240520, "version": 1, "token_dtype": np.uint16},  # "gpt-2"
    7: {"magic": 20240801, "version": 7, "token_dtype": np.uint32},  # "llama-3"
}


def write_datafile(filename, toks, version):
    """data_common.py's write_datafile: 256 int32 of header, then the tokens."""
    assert len(toks) < 2**31, "token count too large"
    info = HEADERS_INFO[version]
    header = np.zeros(256, dtype=np.int32)
    header[0] = info["magic"]
    header[1] = info["version"]
    header[2] = len(toks)
    toks_np = np.array(toks, dtype=info["token_dtype"])
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(toks_np.tobytes())


def write_llmc(out, docs, version, delimiter, shard_size):
    all_tokens = []
    for ids in docs:  # fineweb.py: all_tokens.append(eot); all_tokens.extend(tokens)
        all_tokens.append(delimiter)
        all_tokens.extend(ids)
    if not shard_size:
        write_datafile(out, all_tokens, version)
        return [out]
    names = []
    for i in range(0, len(all_tokens), shard_size):
        names.append(f"{out}_{len(names):06d}.bin")
        write_datafile(names[-1], all_tokens[i:i + shard_size], version)
    return names


# ---- Megatron-LM: megatron/core/datasets/indexed_dataset.py --------------------------------------

_INDEX_HEADER = b"MMIDIDX\x00\x00"
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6,
               "float32": 7, "uint16": 8}


def write_megatron(prefix, docs, dtype_name, append_eod, eod, sentences):
    dtype = getattr(np, dtype_name)
    sequence_lengths, document_indices = [], [0]  # IndexedDatasetBuilder.__init__
    with open(prefix + ".bin", "wb") as data_file:
        for ids in docs:
            # preprocess_data.py: the document's sentences, EOD appended to the last one.
            k = max(1, min(sentences, len(ids)))
            cuts = [len(ids) * i // k for i in range(k + 1)]
            sents = [list(ids[cuts[i]:cuts[i + 1]]) for i in range(k)]
            if append_eod:
                sents[-1].append(eod)
            lengths = [len(s) for s in sents]
            flat = [t for s in sents for t in s]
            if flat and np.issubdtype(dtype, np.integer):
                assert max(flat) <= np.iinfo(dtype).max, f"id {max(flat)} does not fit {dtype_name}"
            # add_document
            np_array = np.array(flat, dtype=dtype)
            data_file.write(np_array.tobytes(order="C"))
            sequence_lengths.extend(lengths)
            document_indices.append(len(sequence_lengths))
    # finalize -> _IndexWriter
    with open(prefix + ".idx", "wb") as idx:
        idx.write(_INDEX_HEADER)
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", DTYPE_CODES[dtype_name]))
        itemsize = np.int64(np.dtype(dtype).itemsize)
        curr_ptr, pointers = np.int64(0), []
        for length in sequence_lengths:
            pointers.append(curr_ptr.item())
            curr_ptr += length * itemsize
        idx.write(struct.pack("<Q", len(sequence_lengths)))
        idx.write(struct.pack("<Q", len(document_indices)))
        idx.write(np.array(sequence_lengths, dtype=np.int32).tobytes(order="C"))
        idx.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        idx.write(np.array(document_indices, dtype=np.int64).tobytes(order="C"))
    return [prefix + ".bin", prefix + ".idx"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("layout", choices=["llmc", "megatron"])
    p.add_argument("out")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="shard", help="a marin token shard (.tok)")
    src.add_argument("--docs-json", help="a JSON file: a list of documents, each a list of ids")
    p.add_argument("--eos", type=int, required=True, help="the tokenizer's EOS id")
    p.add_argument("--bos", type=int, help="the tokenizer's BOS id (llm.c version 7)")
    p.add_argument("--version", type=int, choices=[1, 7], default=1)
    p.add_argument("--shard-size", type=int, default=0)
    p.add_argument("--dtype", choices=list(DTYPE_CODES), help="Megatron token dtype")
    p.add_argument("--vocab", type=int, default=65536, help="for the default Megatron dtype")
    p.add_argument("--no-eod", action="store_true")
    p.add_argument("--sentences", type=int, default=1)
    a = p.parse_args()
    if a.shard:
        docs = shard_documents(a.shard, a.eos)
    else:
        with open(a.docs_json) as f:
            docs = json.load(f)
    if a.layout == "llmc":
        delimiter = a.eos if a.version == 1 else a.bos
        assert delimiter is not None, "llm.c version 7 needs --bos"
        names = write_llmc(a.out, docs, a.version, delimiter, a.shard_size)
    else:
        dtype = a.dtype or ("uint16" if a.vocab < 65500 else "int32")  # DType.optimal_dtype
        names = write_megatron(a.out, docs, dtype, not a.no_eod, a.eos, a.sentences)
    print("\n".join(names))


if __name__ == "__main__":
    main()
