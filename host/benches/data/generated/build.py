#!/usr/bin/env python3
"""Assemble conversations.json and labels.jsonl from the hand-written sources in src/.

Source format (one file per person, src/NN_name.txt):

    PERSON: Full Name
    ASKED: YYYY-MM-DD
    SESSION YYYY-MM-DD HH:MM
    U: user message
    A: assistant reply
    U[key]: user message of an exchange that questions point at
    A: assistant reply
    ...
    QUESTIONS
    Q type key1[,key2] | question | answer

Sessions get ids s01, s02, ... in file order. A key names one exchange; build.py turns
keys into {"session", "exchange"} pairs, so labels cannot drift when text is edited.
"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(path):
    person, asked, sessions, questions = None, None, [], []
    keys = {}
    in_q = False
    pending_user = None
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{os.path.basename(path)}:{n}"
        if line.startswith("PERSON:"):
            person = line[7:].strip()
        elif line.startswith("ASKED:"):
            asked = line[6:].strip()
        elif line.startswith("SESSION "):
            sessions.append({"id": f"s{len(sessions) + 1:02d}", "date": line[8:].strip(), "exchanges": []})
        elif line == "QUESTIONS":
            in_q = True
        elif in_q and line.startswith("Q "):
            head, question, answer = [p.strip() for p in line[2:].split("|")]
            qtype, keylist = head.split()
            ev = []
            for k in keylist.split(","):
                if k not in keys:
                    sys.exit(f"{where}: unknown key {k}")
                ev.append(keys[k])
            questions.append({"type": qtype, "question": question, "answer": answer, "evidence": ev})
        elif line.startswith("U"):
            m = re.match(r"U(?:\[([\w-]+)\])?:\s*(.*)$", line)
            if not m or pending_user is not None:
                sys.exit(f"{where}: bad user line")
            key, pending_user = m.group(1), m.group(2)
            if key:
                if key in keys:
                    sys.exit(f"{where}: duplicate key {key}")
                keys[key] = {"session": sessions[-1]["id"], "exchange": len(sessions[-1]["exchanges"])}
        elif line.startswith("A:"):
            if pending_user is None:
                sys.exit(f"{where}: assistant line without user line")
            sessions[-1]["exchanges"].append({"user": pending_user, "assistant": line[2:].strip()})
            pending_user = None
        else:
            sys.exit(f"{where}: cannot parse: {line[:60]}")
    return person, asked, sessions, questions


def main():
    convs, labels = {}, []
    for path in sorted(glob.glob(os.path.join(HERE, "src", "*.txt"))):
        person, asked, sessions, questions = parse(path)
        convs[person] = {"sessions": sessions}
        for i, q in enumerate(questions):
            labels.append({"person": person, "q": i, "question": q["question"], "asked": asked,
                           "evidence": q["evidence"], "answer": q["answer"], "type": q["type"]})
    with open(os.path.join(HERE, "conversations.json"), "w", encoding="utf-8") as f:
        json.dump(convs, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(HERE, "labels.jsonl"), "w", encoding="utf-8") as f:
        for l in labels:
            f.write(json.dumps(l, ensure_ascii=False) + "\n")
    print(f"built {len(convs)} people, {len(labels)} questions")


if __name__ == "__main__":
    main()
