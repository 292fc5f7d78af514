"""A shortcut probe's settings: which `arct` or `hans` step, on what (`run/analyze_shortcuts.py`).

`ShortcutSettings` holds every mode's fields (a mode reads its own, named
in its help: ``arct_cues: ...``); `check_needed` says which a mode cannot do
without. The work is `data.probing.arct` (cues, ablations, adversarial data)
and `data.probing.hans` (generation, evaluation).
"""

import dataclasses
from typing import List, Optional

from data.options import option
from data.processors.generic import GenericColumns
from data.probing import arct

__all__ = ["MODES", "NEEDED", "ShortcutSettings"]

MODES = ("arct_cues", "arct_ablations", "arct_adversarial", "hans_generate", "hans_evaluate")

# What each mode cannot do without, in the order they are checked.
NEEDED = {
    "arct_cues": ("data_dir", "output_dir"),
    "arct_ablations": ("data_dir", "output_dir"),
    "arct_adversarial": ("data_dir", "output_dir"),
    "hans_generate": ("output_dir",),
    "hans_evaluate": ("input", "predictions_file", "output_dir"),
}


@dataclasses.dataclass
class ShortcutSettings(GenericColumns):
    """One shortcut-probing step; the fields are `run/analyze_shortcuts.py`'s flags."""

    mode: Optional[str] = option(None, "What to do.", choices=MODES)
    data_dir: Optional[str] = option(None, "The data set's directory (arct_* modes).")
    input: Optional[str] = option(
        None, "hans_evaluate: the HANS TSV (or a directory holding hans.tsv) the "
        "predictions are of.")
    output_dir: Optional[str] = option(None, "Where the outputs are written.")
    task_name: str = option(
        "arct", "arct_cues: the processor (arct, swag, multiple_choice, mnli, generic, ...).")
    processor: Optional[str] = option(
        None, "arct_cues: your own processor, path/to/file.py:Class.")
    split: str = option("train", "arct_cues: the split to analyse.", choices=arct.SPLITS)
    ngram_orders: List[str] = option(help="arct_cues: n-gram orders of the cues.",
                                     default_factory=lambda: ["1", "2"])
    min_applicability: int = option(
        1, "arct_cues: leave out cues applicable to fewer data points.")
    top: Optional[int] = option(None, "arct_cues: write only the top cues (default all).")
    # A string flag here, as it always was (the group's is an enum).
    file_format: str = option("tsv", "generic processor: tsv, csv or jsonl.")
    ablations: List[str] = option(help="arct_ablations: which to write.",
                                  default_factory=lambda: list(arct.ABLATIONS))
    keep_original: bool = option(
        True, "arct_adversarial: write each negatable row and its negated copy, Niven & "
        "Kao's set, every warrant cue at chance (--nokeep_original: the copies only).")
    per_template: int = option(100, "hans_generate: pairs per template (30 templates).",
                               lower_bound=1)
    seed: int = option(0, "hans_generate: random seed.")
    subcases: Optional[List[str]] = option(None, "hans_generate: only these sub-cases.")
    predictions_file: Optional[str] = option(
        None, "hans_evaluate: run_classifier's test_results.tsv (class probabilities per "
        "example, in file order).")
    label_list: Optional[List[str]] = option(
        None, "hans_evaluate: the classifier's labels in column order (default "
        "contradiction,entailment,neutral for 3 columns, entailment,non-entailment for 2).")
    plot: bool = option(
        True, "arct_cues: also write cues.png; hans_evaluate: hans.png (each also a "
        "TensorBoard image in --output_dir/tensorboard).")
    plot_top: int = option(10, "arct_cues: cues labelled in cues.png.", lower_bound=0)

    def check_needed(self):
        """Raises ValueError naming the first setting `mode` needs that is not given."""
        for name in NEEDED.get(self.mode, ()):
            if not getattr(self, name):
                raise ValueError("--mode=%s needs --%s" % (self.mode, name))

    def orders(self):
        """`ngram_orders` as integers."""
        try:
            orders = [int(o) for o in self.ngram_orders]
        except ValueError:
            orders = None
        if not orders or any(o < 1 for o in orders):
            raise ValueError("--ngram_orders=%s: expected positive integers such as 1,2"
                             % ",".join(self.ngram_orders))
        return orders

    def generic_processor_options(self):
        """The generic processor's keyword arguments (`arct.load_examples`), {} for others."""
        if (self.task_name or "").lower() == "generic" and not self.processor:
            return dict(file_format=self.file_format, text_a_column=self.text_a_column,
                        text_b_column=self.text_b_column, label_column=self.label_column,
                        has_header=self.has_header, labels=self.labels)
        return {}
