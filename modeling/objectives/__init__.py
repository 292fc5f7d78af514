"""Pre-training objectives: head + loss + metrics + context-free baseline, one module each.

    base.py           `Objective` (the contract), `BertPretrainer`/`Pretrainer`
    masked_lm.py      BERT's masked LM ("masked_lm")
    next_sentence.py  next-sentence ("next_sentence") and sentence-order
                      ("sentence_order") prediction
    span_boundary.py  SpanBERT's span-boundary objective ("span_boundary")

and every module added here (a causal LM, a permutation LM, ...) registers
its objectives by name in `modeling.registry.objectives`, as
`factory(config, family, **kwargs) -> Objective`, for recipes to name.
See `modeling.objectives.base` for the contract.
"""

from modeling.objectives.base import BertPretrainer
from modeling.objectives.base import Objective
from modeling.objectives.base import Pretrainer
from modeling.objectives.base import head_kwargs
from modeling.objectives.base import sparse_cross_entropy
from modeling.objectives.masked_lm import MaskedLMHead
from modeling.objectives.masked_lm import MaskedLMObjective
from modeling.objectives.masked_lm import masked_lm_loss
from modeling.objectives.next_sentence import NextSentenceHead
from modeling.objectives.next_sentence import NextSentenceObjective
from modeling.objectives.next_sentence import next_sentence_loss
from modeling.objectives.span_boundary import SpanBoundaryHead
from modeling.objectives.span_boundary import SpanBoundaryObjective

__all__ = [
    "BertPretrainer", "MaskedLMHead", "MaskedLMObjective", "NextSentenceHead",
    "NextSentenceObjective", "Objective", "Pretrainer", "SpanBoundaryHead",
    "SpanBoundaryObjective", "head_kwargs", "masked_lm_loss", "next_sentence_loss",
    "sparse_cross_entropy",
]
