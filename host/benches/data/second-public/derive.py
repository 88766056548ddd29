#!/usr/bin/env python3
"""Derive the compact g2 "second-public" recall set from LongMemEval_S.

Usage:
    python3 derive.py SOURCE [OUT_DIR]

SOURCE is either
  * the official LongMemEval_S file (longmemeval_s.json / longmemeval_s_cleaned.json,
    a JSON list of question items), or
  * a directory of per-question JSON files, one LongMemEval_S item per file
    (as in hussainzs/Memoria evaluations/data/lme_jsons, S-sized items only).
OUT_DIR defaults to the directory holding this script.

Deterministic: no randomness, no clock; all choices are by sorted ids / sha1 ranks.
"""
import hashlib
import json
import os
import re
import sys
from collections import Counter, OrderedDict

N_GROUPS = 9            # groups ("persons") to build
PER_TYPE_PER_GROUP = 3  # questions of each question type in each group
GROUP_SESSIONS = 50     # pad each group with distractor sessions up to this many
TYPES = [
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
]


def load_items(src):
    if os.path.isdir(src):
        items = []
        for name in sorted(os.listdir(src)):
            if name.endswith(".json") and not name.startswith("_"):
                with open(os.path.join(src, name), encoding="utf-8") as f:
                    items.append(json.load(f))
        return items
    with open(src, encoding="utf-8") as f:
        return json.load(f)


DATE_PRIORITY = [
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
]

DATE_RE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})$")


def norm_date(s):
    m = DATE_RE.match(s.strip())
    if not m:
        raise ValueError("unexpected date format: %r" % s)
    y, mo, d, h, mi = m.groups()
    return "%s-%s-%s %s:%s" % (y, mo, d, h, mi)


def to_exchanges(turns):
    """Pair turns into exchanges; return (exchanges, turn_index -> exchange_index)."""
    ex = []
    tmap = []
    open_user = False  # last exchange has a user message and no assistant reply yet
    for t in turns:
        role, content = t["role"], t["content"]
        if role == "user":
            ex.append({"user": content, "assistant": ""})
            open_user = True
        elif role == "assistant":
            if open_user:
                ex[-1]["assistant"] = content
            else:
                ex.append({"user": "", "assistant": content})
            open_user = False
        else:
            raise ValueError("unexpected role %r" % role)
        tmap.append(len(ex) - 1)
    return ex, tmap


def rank(sid):
    return hashlib.sha1(sid.encode("utf-8")).hexdigest()


def main():
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    items = load_items(src)

    # Eligible: not abstention, has at least one has_answer turn.
    eligible = {t: [] for t in TYPES}
    for it in sorted(items, key=lambda x: x["question_id"]):
        if it["question_id"].endswith("_abs"):
            continue
        if not any(turn.get("has_answer") for s in it["haystack_sessions"] for turn in s):
            continue
        eligible[it["question_type"]].append(it)

    # Selection: types in TYPES order; within a type, questions in question_id order;
    # a question is skipped if it shares an evidence session with an already chosen
    # question (LongMemEval has sibling questions over the same evidence sessions with
    # different timestamps); take the first N_GROUPS*PER_TYPE_PER_GROUP per type.
    # The k-th chosen question of a type goes to group k // PER_TYPE_PER_GROUP.
    def evidence_sids(it):
        sids = set(it["answer_session_ids"])
        for sid, turns in zip(it["haystack_session_ids"], it["haystack_sessions"]):
            if any(turn.get("has_answer") for turn in turns):
                sids.add(sid)
        return sids

    stats = Counter()
    groups = [[] for _ in range(N_GROUPS)]
    used = set()
    for t in TYPES:
        chosen = []
        for it in eligible[t]:
            if len(chosen) == N_GROUPS * PER_TYPE_PER_GROUP:
                break
            ev = evidence_sids(it)
            if ev & used:
                stats["skipped_sharing_evidence"] += 1
                continue
            used |= ev
            chosen.append(it)
        for k, it in enumerate(chosen):
            groups[k // PER_TYPE_PER_GROUP].append(it)

    conversations = OrderedDict()
    labels = []
    for g, qs in enumerate(groups):
        name = "lme-g%02d" % (g + 1)
        qs = sorted(qs, key=lambda x: (norm_date(x["question_date"]), x["question_id"]))
        # Evidence sessions (answer_session_ids or any has_answer turn) are always kept and
        # take their date from a question they are evidence for; when several questions
        # share one, date-sensitive types win (DATE_PRIORITY order, then qs order).
        # Other sessions take the date of the first question (in qs order) whose haystack
        # holds them.
        pool = OrderedDict()     # sid -> (date, turns)
        needed = OrderedDict()   # evidence sessions, always kept
        for it in sorted(qs, key=lambda x: DATE_PRIORITY.index(x["question_type"])):
            ans = set(it["answer_session_ids"])
            for sid, d, turns in zip(it["haystack_session_ids"], it["haystack_dates"],
                                     it["haystack_sessions"]):
                if (sid in ans or any(turn.get("has_answer") for turn in turns)) \
                        and sid not in needed:
                    needed[sid] = True
                    pool[sid] = (norm_date(d), turns)
        for it in qs:
            for sid, d, turns in zip(it["haystack_session_ids"], it["haystack_dates"],
                                     it["haystack_sessions"]):
                if sid not in pool:
                    pool[sid] = (norm_date(d), turns)
                elif pool[sid][0] != norm_date(d):
                    stats["date_conflicts"] += 1
                    if sid in needed and any(t.get("has_answer") for t in turns):
                        stats["evidence_date_conflicts"] += 1
        stats["evidence_sessions"] += len(needed)
        keep = list(needed)
        distractors = sorted((s for s in pool if s not in needed), key=rank)
        keep += distractors[: max(0, GROUP_SESSIONS - len(keep))]
        keep_set = set(keep)

        sessions = []
        tmaps = {}
        for sid in sorted(keep, key=lambda s: (pool[s][0], s)):
            date, turns = pool[sid]
            ex, tmap = to_exchanges(turns)
            tmaps[sid] = tmap
            sessions.append({"id": sid, "date": date, "exchanges": ex})
            stats["exchanges"] += len(ex)
        conversations[name] = {"sessions": sessions}
        stats["sessions"] += len(sessions)
        last_date = max(s["date"] for s in sessions)

        for q, it in enumerate(qs):
            evidence = []
            for sid, turns in zip(it["haystack_session_ids"], it["haystack_sessions"]):
                for ti, turn in enumerate(turns):
                    if turn.get("has_answer"):
                        assert sid in keep_set
                        e = {"session": sid, "exchange": tmaps[sid][ti]}
                        if e not in evidence:
                            evidence.append(e)
            asked = norm_date(it["question_date"])
            if asked < last_date:
                stats["questions_with_later_sessions_in_group"] += 1
            labels.append({
                "person": name,
                "q": q,
                "question": it["question"],
                "asked": asked[:10],
                "evidence": evidence,
                "answer": str(it["answer"]),
                "type": it["question_type"],
                "source_question_id": it["question_id"],
            })
            stats["questions"] += 1
            stats["type:" + it["question_type"]] += 1
            stats["evidence_exchanges"] += len(evidence)

    with open(os.path.join(out, "conversations.json"), "w", encoding="utf-8") as f:
        json.dump(conversations, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(out, "labels.jsonl"), "w", encoding="utf-8") as f:
        for lab in labels:
            f.write(json.dumps(lab, ensure_ascii=False) + "\n")

    all_ids = Counter(s["id"] for c in conversations.values() for s in c["sessions"])
    stats["sessions_in_more_than_one_group"] = sum(1 for v in all_ids.values() if v > 1)
    stats["groups"] = len(conversations)
    for k in sorted(stats):
        print("%s\t%s" % (k, stats[k]))


if __name__ == "__main__":
    main()
