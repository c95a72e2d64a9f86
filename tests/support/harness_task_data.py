#!/usr/bin/python3
"""Synthetic local data for the 14 real lm-evaluation-harness tasks of issue 40 (arc_easy,
arc_challenge, hellaswag, piqa, winogrande, boolq, lambada_openai, openbookqa, sciq, copa, mmlu,
truthfulqa_mc1, triviaqa, gsm8k): a few documents per split with exactly the fields and types
the tasks' YAML and utils.py read, laid out as the Hub lays them out for --dataset-root
(DIR/<dataset_path>/<dataset_name or data>/<split>-00000-of-00001.jsonl).

    /usr/bin/python3 tests/support/harness_task_data.py DIR [MMLU_SUBJECT ...]

Used by tests/support/real_harness_tasks.sh (docs/evaluation.md, "The 14 real harness tasks")."""
import json, os, sys

root = sys.argv[1]

def write(path, name, split, rows):
    d = os.path.join(root, path, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{split}-00000-of-00001.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

WORDS = ["water", "light", "stone", "tree", "river", "fire", "cloud", "seed"]

def arc(n, tag):
    out = []
    for i in range(n):
        labels = ["A", "B", "C", "D"] if i % 2 == 0 else ["1", "2", "3", "4"]
        out.append({"id": f"{tag}_{i}", "question": f"Which thing is the {WORDS[i % 8]} number {i}?",
                    "choices": {"text": [WORDS[(i + k) % 8] for k in range(4)], "label": labels},
                    "answerKey": labels[i % 4]})
    return out

for name in ("ARC-Easy", "ARC-Challenge"):
    for split in ("train", "validation", "test"):
        write("allenai/ai2_arc", name, split, arc(4, f"{name}-{split}"))

def hellaswag(n):
    return [{"ind": i, "activity_label": "Making tea", "ctx_a": f"A man boils the {WORDS[i % 8]}.",
             "ctx_b": "then he", "ctx": f"A man boils the {WORDS[i % 8]}. then he",
             "endings": [f"pours it [title] into a cup {k}." for k in range(4)],
             "source_id": f"wikihow~{i}", "split": "val", "split_type": "indomain", "label": str(i % 4)}
            for i in range(n)]
for split in ("train", "validation"):
    write("Rowan/hellaswag", "data", split, hellaswag(4))

for split in ("train", "validation"):
    write("baber/piqa", "data", split,
          [{"goal": f"How do you carry {WORDS[i % 8]}?", "sol1": "In a bucket.", "sol2": "In a net.", "label": i % 2}
           for i in range(4)])

for split in ("train", "validation"):
    write("allenai/winogrande", "winogrande_xl", split,
          [{"sentence": f"The {WORDS[i % 8]} did not fit in the box because _ was too big.",
            "option1": WORDS[i % 8], "option2": "box", "answer": str(1 + i % 2)} for i in range(4)])

for split in ("train", "validation"):
    write("aps/super_glue", "boolq", split,
          [{"question": f"is {WORDS[i % 8]} wet", "passage": f"The {WORDS[i % 8]} is by the river.",
            "idx": i, "label": i % 2} for i in range(4)])
    write("aps/super_glue", "copa", split,
          [{"premise": f"The {WORDS[i % 8]} fell.", "choice1": "The wind blew.", "choice2": "The sun rose.",
            "question": ("cause", "effect")[i % 2], "idx": i, "label": i % 2} for i in range(4)])

write("EleutherAI/lambada_openai", "default", "test",
      [{"text": f"In the beginning the {WORDS[i % 8]} was over the {WORDS[(i + 3) % 8]}"} for i in range(4)])

for split in ("train", "validation", "test"):
    write("allenai/openbookqa", "main", split,
          [{"id": f"{split}-{i}", "question_stem": f"The {WORDS[i % 8]} is made of",
            "choices": {"text": [WORDS[(i + k) % 8] for k in range(4)], "label": ["A", "B", "C", "D"]},
            "answerKey": "ABCD"[i % 4]} for i in range(4)])

for split in ("train", "validation", "test"):
    write("allenai/sciq", "data", split,
          [{"question": f"What is {WORDS[i % 8]}?", "distractor3": "stone", "distractor1": "fire",
            "distractor2": "cloud", "correct_answer": WORDS[i % 8],
            "support": ("" if i % 2 else f" The {WORDS[i % 8]} is a thing.")} for i in range(4)])

write("truthfulqa/truthful_qa", "multiple_choice", "validation",
      [{"question": f"What happens if you drink {WORDS[i % 8]}?",
        "mc1_targets": {"choices": ["Nothing happens.", "You fly.", "You glow."], "labels": [1, 0, 0]},
        "mc2_targets": {"choices": ["Nothing happens.", "Nothing.", "You fly."], "labels": [1, 1, 0]}}
       for i in range(4)])

def trivia(n, split):
    return [{"question": f"Which {WORDS[i % 8]} is the river", "question_id": f"tq_{split}_{i}",
             "question_source": "http://www.example.com/", "entity_pages": {"doc_source": [], "filename": [],
             "title": [], "wiki_context": []},
             "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [],
                                "search_context": []},
             "answer": {"aliases": [WORDS[i % 8].capitalize(), WORDS[i % 8]],
                        "normalized_aliases": [WORDS[i % 8]], "matched_wiki_entity_name": "",
                        "normalized_matched_wiki_entity_name": "", "normalized_value": WORDS[i % 8],
                        "type": "WikipediaEntity", "value": WORDS[i % 8].capitalize()}} for i in range(n)]
for split in ("train", "validation"):
    write("mandarjoshi/trivia_qa", "rc.nocontext", split, trivia(4, split))

def gsm(n):
    return [{"question": f"Tom has {i} apples and buys {i + 2}. How many apples does he have?",
             "answer": f"He has {i} + {i + 2} = <<{i}+{i + 2}={2 * i + 2}>>{2 * i + 2} apples.\n#### {2 * i + 2}"}
            for i in range(n)]
write("openai/gsm8k", "main", "train", gsm(8))
write("openai/gsm8k", "main", "test", gsm(4))

# MMLU: every subject of the harness's default group (names given on the command line, or these).
subjects = sys.argv[2:] or ["abstract_algebra", "anatomy", "astronomy"]
for s in subjects:
    for split in ("dev", "test"):
        write("cais/mmlu", s, split,
              [{"question": f"{s.replace('_', ' ')} question {i}: what is {WORDS[i % 8]}?", "subject": s,
                "choices": [WORDS[(i + k) % 8] for k in range(4)], "answer": i % 4}
               for i in range(5 if split == "dev" else 3)])
