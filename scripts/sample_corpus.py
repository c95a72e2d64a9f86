#!/usr/bin/env python3
"""The tokenizer's training sample (docs/scaling.md): the first BYTES bytes of JSONL lines of each
training domain's first shard, in domain order. Usage: sample_corpus.py CORPUS BYTES > sample.jsonl"""
import glob, os, sys

root, budget = sys.argv[1], int(sys.argv[2])
for shard in sorted(glob.glob(os.path.join(root, "*", "train-00000.jsonl"))):
    taken = 0
    with open(shard, encoding="utf-8") as f:
        for line in f:
            if taken > budget:
                break
            sys.stdout.write(line)
            taken += len(line)
