"""The generated FAQ paraphrase training set of `bench_matching.py`'s accuracy comparison.

Training pairs (user query, stored question) come from 16 intents x 30
slots, none of which is a hand-written FAQ question of `bench_matching.FAQ`
(the held-out test set): each intent has ONE stored phrasing and several
user phrasings with other words, and each slot has a stored name and
synonyms used in the queries ("gym membership" is stored, the user says
"fitness pass"). Every (intent, slot) stored question occurs once, so the
in-batch negatives of the bi-encoder are never its own positive.

`training_pairs(seed)` -> [(query, stored, intent, slot)], deterministic.
`cross_encoder_rows(pairs, seed)` -> (query, stored, label) rows: every
positive with 3 negatives (1:3): the same slot with another intent, the same
intent with another slot (both hard), and a random other stored question.
"""

import numpy as np

# (stored phrasing, user phrasings); {s} is the slot's stored name, {q} a synonym.
INTENTS = [
    ("Is there an age limit for the {s}?",
     ["are children allowed to get a {q}", "how old must I be for a {q}"]),
    ("How do I change the name on my {s}?",
     ["I got married and my {q} still shows my old surname", "my {q} has the wrong name on it"]),
    ("Can I transfer my {s} to someone else?",
     ["can my brother take over my {q}", "I want to give my {q} to a friend"]),
    ("How do I report a problem with my {s}?",
     ["something is wrong with my {q}, who do I tell", "my {q} is not working properly"]),
    ("Is there a waiting list for the {s}?",
     ["do I have to queue to get a {q}", "how long must I wait before I get a {q}"]),
    ("Which documents do I need to apply for a {s}?",
     ["what papers should I bring to get a {q}", "what must I show when I sign up for a {q}"]),
    ("Can I pause my {s} for a few months?",
     ["I am away over the summer, can I freeze my {q}", "put my {q} on hold please"]),
    ("How do I upgrade my {s}?",
     ["I want a better {q}", "can I move to the premium {q}"]),
    ("Where can I download the form for my {s}?",
     ["I need the paperwork for my {q} as a pdf", "is there a printable sheet for my {q}"]),
    ("Who do I pay the {s} fee to?",
     ["where does the money for my {q} go", "how do I settle the charge for my {q}"]),
    ("Can I see my {s} history?",
     ["show me my past {q} activity", "I want a record of everything on my {q}"]),
    ("What happens if I miss a {s} payment?",
     ["I forgot to pay for my {q} this month", "is there a penalty if my {q} bill is late"]),
    ("Does the {s} come with insurance?",
     ["am I covered if something happens with my {q}", "is my {q} protected against damage"]),
    ("How do I add a family member to my {s}?",
     ["can my wife join my {q}", "I want my kids on my {q} too"]),
    ("Is the {s} tax deductible?",
     ["can I claim my {q} back from the tax office", "does my {q} lower what I owe in taxes"]),
    ("Can I use my {s} abroad?",
     ["does my {q} work when I am on holiday in Spain", "will my {q} be valid in another "
      "country"]),
]

# (stored name, synonyms the users say).
SLOTS = [
    ("gym membership", ["fitness pass", "gym plan"]),
    ("phone contract", ["mobile plan", "cell phone deal"]),
    ("parking permit", ["resident parking card", "car park pass"]),
    ("home insurance", ["house cover", "property insurance"]),
    ("bank account", ["current account", "checking account"]),
    ("museum pass", ["gallery ticket", "museum card"]),
    ("bus pass", ["travel card", "season ticket for the bus"]),
    ("internet package", ["broadband", "wifi plan"]),
    ("storage unit", ["locker rental", "self storage space"]),
    ("car lease", ["leased vehicle", "rental car agreement"]),
    ("music streaming plan", ["song app account", "music service"]),
    ("swimming course", ["swim lessons", "pool classes"]),
    ("driving lessons", ["driving school", "lessons with an instructor"]),
    ("loyalty card", ["points card", "rewards card"]),
    ("apartment rental", ["flat I rent", "leased flat"]),
    ("bicycle rental", ["bike hire", "city bike plan"]),
    ("newspaper delivery", ["daily paper", "print edition"]),
    ("language course", ["Spanish classes", "French lessons"]),
    ("electricity tariff", ["power plan", "energy deal"]),
    ("pension plan", ["retirement savings", "retirement fund"]),
    ("cloud storage plan", ["online backup", "file hosting account"]),
    ("dental plan", ["dentist cover", "teeth insurance"]),
    ("concert season ticket", ["concert series pass", "orchestra subscription"]),
    ("child care place", ["nursery spot", "daycare place"]),
    ("coworking desk", ["shared office seat", "hot desk"]),
    ("wine club membership", ["wine delivery club", "monthly wine box"]),
    ("pet insurance", ["cover for my cat", "dog insurance"]),
    ("garden plot", ["allotment", "community garden bed"]),
    ("student loan", ["university loan", "study loan"]),
    ("marina berth", ["boat mooring", "harbour spot"]),
]


def stored_question(intent, slot):
    return INTENTS[intent][0].format(s=SLOTS[slot][0])


def training_pairs(seed=0):
    """All 16 x 30 (query, stored, intent, slot), shuffled; one random user phrasing each."""
    rng = np.random.RandomState(seed)
    pairs = []
    for i, (_, phrasings) in enumerate(INTENTS):
        for s, (_, synonyms) in enumerate(SLOTS):
            query = phrasings[rng.randint(len(phrasings))].format(
                q=synonyms[rng.randint(len(synonyms))])
            pairs.append((query, stored_question(i, s), i, s))
    order = rng.permutation(len(pairs))
    return [pairs[k] for k in order]


def cross_encoder_rows(pairs, seed=0):
    """(query, stored, "1"/"0") rows: each positive, then its 3 negatives (see module doc)."""
    rng = np.random.RandomState(seed + 1)
    rows = []
    for query, stored, i, s in pairs:
        other_intent = (i + 1 + rng.randint(len(INTENTS) - 1)) % len(INTENTS)
        other_slot = (s + 1 + rng.randint(len(SLOTS) - 1)) % len(SLOTS)
        while True:
            ri, rs = rng.randint(len(INTENTS)), rng.randint(len(SLOTS))
            if ri != i and rs != s:
                break
        rows.append((query, stored, "1"))
        rows.append((query, stored_question(other_intent, s), "0"))
        rows.append((query, stored_question(i, other_slot), "0"))
        rows.append((query, stored_question(ri, rs), "0"))
    order = rng.permutation(len(rows))
    return [rows[k] for k in order]
