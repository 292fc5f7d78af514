"""Probing data sets for shortcuts: no model here, only data in and data out.

    arct   cue statistics (Niven & Kao 2019: applicability, productivity and
           coverage of unigram/bigram cues) for multiple-choice and pair
           data; ARCT ablation baselines and the adversarial (negated claim)
           data set, written as ARCT TSV files run_classifier reads unchanged
    hans   a HANS-style template generator (McCoy et al. 2019: lexical overlap,
           subsequence and constituent heuristics, entailed and not) and the
           per-heuristic evaluation of an NLI classifier's predictions

`run/analyze_shortcuts.py` is the command line.
"""
