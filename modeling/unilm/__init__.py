"""UNILM (Dong et al. 2019): one BERT trained as four language models, and seq2seq decoding.

UNILM is not a new network: it is BERT's encoder (the "bert" family, so a
Google or HF BERT checkpoint initialises it and its checkpoints load where
BERT's do) trained by BERT's masked-LM objective, with what each token may
see set per example by an attention mask:

* `masks`: the bidirectional, left-to-right, right-to-left and seq2seq
  masks, and the paper's mix of them;
* `pipelines`: the "unilm" pre-training pipeline (contiguous segment
  pairs, whole-word and 2-3-gram cloze, one mask per example) and the
  "unilm_seq2seq" fine-tuning pipeline (`source<TAB>target` pairs, only
  target tokens masked);
* `decoding`: greedy and beam-search generation (`run/generate.py
  --recipe=unilm`: the decoder "unilm" registered in
  `modeling.registry.decoders`).

Recipes: `modeling/recipes/presets/unilm.json` (pre-training) and
`unilm_seq2seq.json` (fine-tuning, `--init_checkpoint` a UNILM or BERT
checkpoint).
"""

from modeling import registry
from modeling.unilm import decoding
from modeling.unilm import masks
from modeling.unilm import pipelines
from modeling.unilm.decoding import Seq2SeqDecoder

__all__ = ["Seq2SeqDecoder", "decoding", "masks", "pipelines"]

registry.decoders.register("unilm", decoding.DECODER)
