#!/usr/bin/env python3
"""The PyTorch side of tests/eval/test_harness_tasks.cpp's loglikelihood check: scores
(context, continuation) requests through an export's python/modeling_marin.py the way
lm-evaluation-harness's HFLM does (_encode_pair, then _loglikelihood_tokens), and computes the
loglikelihood task's metrics as the harness does (perplexity = exp(−mean ll), acc = mean of
is_greedy).

  harness_ll.py EXPORT REQUESTS.json OUT.json

REQUESTS.json: {"max_length": seq_len, "eot": id, "requests": [[context, continuation], ...],
"encodings": {text: [ids]}}: the tokenizer is marin's, so its encodings come as a table; the
split of each request into the texts to encode is done here, by the harness's rule, and a text
the table lacks is an error (the C++ side encoded other texts than the harness would).
"""
import hashlib
import json
import math
import sys

import numpy as np
import torch


def main():
    export, req_path, out_path = sys.argv[1:4]
    torch.set_num_threads(1)
    sys.path.insert(0, export)
    import modeling_marin as mm  # the file inside the export

    model = mm.MarinForCausalLM.from_pretrained(export, torch_dtype=torch.float64,
                                                use_marin_loader=True)
    req = json.load(open(req_path, encoding="utf-8"))
    enc = req["encodings"]
    max_length = req["max_length"]

    def tok_encode(text):
        if text not in enc:
            raise SystemExit(f"no encoding given for {text!r}")
        return list(enc[text])

    def encode_pair(context, continuation):  # HFLM._encode_pair
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces > 0:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole_enc = tok_encode(context + continuation)
        context_enc = tok_encode(context)
        return context_enc, whole_enc[len(context_enc):]

    lls, greedy = [], []
    for context, continuation in req["requests"]:
        if context == "":  # TemplateLM.loglikelihood: the EOT token is the context
            context_enc, continuation_enc = [req["eot"]], tok_encode(continuation)
        else:
            context_enc, continuation_enc = encode_pair(context, continuation)
        # _loglikelihood_tokens: the last max_length + 1 tokens, the last one not an input.
        inp = (context_enc + continuation_enc)[-(max_length + 1):][:-1]
        with torch.no_grad():
            logits = model(torch.tensor([inp], dtype=torch.long)).logits
        logp = torch.log_softmax(logits[0].to(torch.float64), dim=-1)
        n = len(continuation_enc)
        cont_logp = logp[len(inp) - n:len(inp)]
        cont = torch.tensor(continuation_enc, dtype=torch.long)
        greedy.append(bool((cont_logp.argmax(dim=-1) == cont).all()))
        lls.append(float(cont_logp.gather(1, cont[:, None]).sum()))
    out = {"ll": lls, "is_greedy": greedy,
           "perplexity": math.exp(-float(np.mean(lls))),  # the harness's perplexity aggregation
           "acc": float(np.mean(greedy)),
           # the harness's hash_string of the first argument and of str(target)
           "prompt_hash": [hashlib.sha256(c.encode()).hexdigest() for c, _ in req["requests"]],
           "target_hash": [hashlib.sha256(t.encode()).hexdigest() for _, t in req["requests"]]}
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    main()
