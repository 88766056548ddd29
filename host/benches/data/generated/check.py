#!/usr/bin/env python3
"""Validate conversations.json and labels.jsonl (the g2 generated recall set).

Checks: both files parse; people in labels match people in conversations; every person has
12 sessions s01..s12 with valid, strictly increasing dates on distinct days; 6-10 exchanges
per session; message lengths (user 10-60 words, assistant 15-60 words); every label's session
and exchange exist; q indices run 0..n-1; "asked" is after the last session; "when" answers
give the evidence session's date; "update" evidence lists the later exchange first.
Prints counts per type and, for each paraphrase question, the content words it shares with
its evidence exchange(s). Exit status 1 if anything fails (including any shared word).
"""
import collections
import datetime as dt
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = ["paraphrase", "overlap", "when", "update", "assistant"]

# NLTK's English stopword list, plus the pieces contractions split into.
STOPWORDS = set("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves what which who whom this
that these those am is are was were be been being have has had having do does did doing a an
the and but if or because as until while of at by for with about against between into through
during before after above below to from up down in out on off over under again further then
once here there when where why how all any both each few more most other some such no nor not
only own same so than too very s t can will just don should now d ll m o re ve y ain aren
couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
""".split())

errors = []


def err(msg):
    errors.append(msg)


def tokens(text):
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS]


def words(text):
    return len(text.split())


def main():
    try:
        with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
            convs = json.load(f)
    except Exception as e:  # noqa: BLE001
        sys.exit(f"FAIL conversations.json does not parse: {e}")
    labels = []
    with open(os.path.join(HERE, "labels.jsonl"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    labels.append(json.loads(line))
                except Exception as e:  # noqa: BLE001
                    err(f"labels.jsonl line {n} does not parse: {e}")

    n_ex = 0
    n_words = 0
    last_date = {}
    for person, data in convs.items():
        sessions = data.get("sessions", [])
        if len(sessions) != 12:
            err(f"{person}: {len(sessions)} sessions, want 12")
        prev = None
        days = set()
        for i, s in enumerate(sessions):
            want = f"s{i + 1:02d}"
            if s.get("id") != want:
                err(f"{person}: session {i} id {s.get('id')} want {want}")
            try:
                d = dt.datetime.strptime(s["date"], "%Y-%m-%d %H:%M")
            except Exception:  # noqa: BLE001
                err(f"{person} {s.get('id')}: bad date {s.get('date')!r}")
                continue
            if d.year != 2024:
                err(f"{person} {s['id']}: date not in 2024")
            if prev and d <= prev:
                err(f"{person} {s['id']}: date {s['date']} not after previous")
            if d.date() in days:
                err(f"{person} {s['id']}: two sessions on {d.date()}")
            days.add(d.date())
            prev = d
            exs = s.get("exchanges", [])
            if not 6 <= len(exs) <= 10:
                err(f"{person} {s['id']}: {len(exs)} exchanges, want 6-10")
            for j, e in enumerate(exs):
                n_ex += 1
                uw, aw = words(e.get("user", "")), words(e.get("assistant", ""))
                n_words += uw + aw
                if not 10 <= uw <= 60:
                    err(f"{person} {s['id']} ex {j}: user message {uw} words, want 10-60")
                if not 15 <= aw <= 60:
                    err(f"{person} {s['id']} ex {j}: assistant reply {aw} words, want 15-60")
        if sessions:
            first = dt.datetime.strptime(sessions[0]["date"], "%Y-%m-%d %H:%M")
            span = (prev - first).days if prev else 0
            last_date[person] = prev.date() if prev else None
            print(f"{person}: {len(sessions)} sessions, {sum(len(s['exchanges']) for s in sessions)} exchanges, "
                  f"{sessions[0]['date'][:10]} .. {sessions[-1]['date'][:10]} ({span} days)")

    by_person = collections.defaultdict(list)
    type_counts = collections.Counter()
    shared_total = 0
    near_total = 0
    paraphrase_report = []
    for l in labels:
        p = l.get("person")
        if p not in convs:
            err(f"label for unknown person {p!r}")
            continue
        by_person[p].append(l.get("q"))
        t = l.get("type")
        type_counts[t] += 1
        tag = f"{p} q{l.get('q')}"
        if t not in TYPES:
            err(f"{tag}: unknown type {t!r}")
        try:
            asked = dt.datetime.strptime(l["asked"], "%Y-%m-%d").date()
            if last_date.get(p) and asked <= last_date[p]:
                err(f"{tag}: asked {asked} not after last session {last_date[p]}")
        except Exception:  # noqa: BLE001
            err(f"{tag}: bad asked date {l.get('asked')!r}")
        sessions = {s["id"]: s for s in convs[p]["sessions"]}
        ev = l.get("evidence") or []
        if not ev:
            err(f"{tag}: no evidence")
        texts = []
        ok = True
        for e in ev:
            s = sessions.get(e.get("session"))
            if s is None or not isinstance(e.get("exchange"), int) or not 0 <= e["exchange"] < len(s["exchanges"]):
                err(f"{tag}: evidence {e} does not exist")
                ok = False
                continue
            x = s["exchanges"][e["exchange"]]
            texts.append(x["user"] + " " + x["assistant"])
        if not ok:
            continue
        if not l.get("question") or not l.get("answer"):
            err(f"{tag}: empty question or answer")
        if t == "when":
            date = sessions[ev[0]["session"]]["date"][:10]
            if date not in l["answer"]:
                err(f"{tag}: 'when' answer {l['answer']!r} does not give session date {date}")
        if t == "update":
            if len(ev) < 2:
                err(f"{tag}: update needs later and earlier evidence")
            else:
                a, b = ev[0], ev[1]
                if (a["session"], a["exchange"]) <= (b["session"], b["exchange"]):
                    err(f"{tag}: update evidence must list the later exchange first")
        if t == "paraphrase":
            q = set(tokens(l["question"]))
            e = set(tokens(" ".join(texts)))
            shared = sorted(q & e)
            near = sorted({f"{a}~{b}" for a in q for b in e
                           if a != b and len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5]})
            shared_total += len(shared)
            near_total += len(near)
            paraphrase_report.append((tag, shared, near, l["question"]))
            if shared:
                err(f"{tag}: paraphrase shares content words {shared}")

    for p in convs:
        qs = by_person.get(p, [])
        if sorted(qs) != list(range(len(qs))):
            err(f"{p}: question indices {sorted(qs)} are not 0..n-1")
    print()
    print(f"people: {len(convs)}  sessions: {sum(len(d['sessions']) for d in convs.values())}  "
          f"exchanges: {n_ex}  words: {n_words}  questions: {len(labels)}")
    print("questions per type: " + ", ".join(f"{t}={type_counts[t]}" for t in TYPES))
    print("questions per person: " + ", ".join(f"{p}={len(by_person[p])}" for p in convs))
    print()
    print("paraphrase questions: shared content words with evidence (want none)")
    for tag, shared, near, q in paraphrase_report:
        extra = f"  near: {' '.join(near)}" if near else ""
        print(f"  {tag}: shared={shared if shared else 'none'}{extra}  | {q}")
    print(f"paraphrase total: {len(paraphrase_report)} questions, {shared_total} shared words, "
          f"{near_total} near (same 5-letter prefix) pairs")
    print()
    if errors:
        print(f"FAIL: {len(errors)} problem(s)")
        for e in errors:
            print("  " + e)
        sys.exit(1)
    print("OK: all checks passed")
    if "--baseline" in sys.argv:
        baseline(convs, labels)


def baseline(convs, labels):
    """Lexical sanity check: rank each person's exchanges by TF-IDF cosine to the question."""
    import math
    print()
    print("baseline: TF-IDF cosine over each person's exchanges (hit = any evidence exchange in top k)")
    hits = collections.defaultdict(lambda: [0, 0, 0])
    for person, data in convs.items():
        docs, ids = [], []
        for s in data["sessions"]:
            for j, e in enumerate(s["exchanges"]):
                docs.append(collections.Counter(tokens(e["user"] + " " + e["assistant"])))
                ids.append((s["id"], j))
        df = collections.Counter(w for d in docs for w in d)
        idf = {w: math.log(len(docs) / c) + 1 for w, c in df.items()}

        def vec(c):
            v = {w: n * idf.get(w, 0) for w, n in c.items()}
            norm = math.sqrt(sum(x * x for x in v.values())) or 1
            return {w: x / norm for w, x in v.items()}

        dvecs = [vec(d) for d in docs]
        for l in labels:
            if l["person"] != person:
                continue
            q = vec(collections.Counter(tokens(l["question"])))
            scores = sorted(((sum(q.get(w, 0) * x for w, x in d.items()), i) for i, d in enumerate(dvecs)),
                            reverse=True)
            gold = {(e["session"], e["exchange"]) for e in l["evidence"]}
            ranked = [ids[i] for _, i in scores]
            h = hits[l["type"]]
            h[0] += 1
            h[1] += any(r in gold for r in ranked[:1])
            h[2] += any(r in gold for r in ranked[:5])
    for t in TYPES:
        n, h1, h5 = hits[t]
        if n:
            print(f"  {t:<10} n={n:<3} hit@1={h1 / n:.2f} hit@5={h5 / n:.2f}")


if __name__ == "__main__":
    main()
