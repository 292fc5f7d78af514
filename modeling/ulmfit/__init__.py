"""ULMFiT (Howard & Ruder 2018): an AWD-LSTM language model fine-tuned for classification.

The family package holds every ULMFiT-specific part and registers them:

    family     "ulmfit"   (`AwdLstmConfig` in fastai's names, `AwdLstm`, the
                           demo size; config file `ulmfit_config.json`)
    objective  "word_lm"  (`modeling.ulmfit.objective`: a forward word LM whose
                           softmax is the embedding matrix, plus a bias; AWD-LSTM's
                           AR and TAR in training)
    pipeline   "ulmfit"   (`modeling.ulmfit.pipeline`: raw text as continuous BPTT
                           streams of word ids, variable-length, the LSTM state
                           carried from batch to batch; or one sentence per example)
    input format "ulmfit" (`modeling.ulmfit.classification`: run_classifier's
                           `--model_family=ulmfit`, the concat-pooling classifier)

and the recipe `modeling/recipes/presets/ulmfit.json` names them (with the
paper's alpha 2, beta 1). The three stages of the paper are three runs:

    1. general-domain LM:  run_pretraining.py --recipe=ulmfit --output_dir=LM
    2. target-domain LM:   run_pretraining.py --recipe=ulmfit --init_checkpoint=LM
                           --input_file=target.txt --bert_config_file=LM/ulmfit_config.json
                           --vocab_file=VOCAB --output_dir=LM2 --do_train --do_eval ...
    3. classifier:         run_classifier.py --model_family=ulmfit --init_checkpoint=LM2
                           --bert_config_file=LM2/ulmfit_config.json --vocab_file=VOCAB
                           [--lr_schedule=stlr --layer_lr_decay=2.6 --unfreeze_steps=N]

    from modeling.ulmfit import AwdLstm, AwdLstmConfig
    network = AwdLstm.from_config_object(AwdLstmConfig(vocab_size=2275, embedding_size=64,
                                                       hidden_size=128))
    outputs = network({"input_ids": ids}, training=False)  # sequence_output, layers
"""

from modeling import registry
from modeling.ulmfit import objective  # registers "word_lm"  # noqa: F401
from modeling.ulmfit import pipeline  # registers the "ulmfit" pipeline  # noqa: F401
from modeling.ulmfit.config import CONFIG_FILE_NAME
from modeling.ulmfit.config import AwdLstmConfig
from modeling.ulmfit.config import AwdLstmConfigError
from modeling.ulmfit.config import load_awd_lstm_config
from modeling.ulmfit.network import AwdLstm
from modeling.ulmfit.network import WeightDropLSTM
from modeling.ulmfit.network import WordEmbedding
from modeling.ulmfit.objective import WordLMObjective

__all__ = ["AwdLstm", "AwdLstmConfig", "AwdLstmConfigError", "WeightDropLSTM",
           "WordEmbedding", "WordLMObjective", "demo_config", "load_awd_lstm_config"]


def demo_config(vocab_size):
    """The demo's AWD-LSTM: three layers at toy size (embeddings 64, LSTMs 256, 256, 64).

    fastai's LM dropouts; word vectors start in [-0.5, 0.5] (fastai's 0.1 is
    for 400-wide ones: at this width the tied softmax barely moves from the
    unigram model in the demo's 300 steps).
    """
    return AwdLstmConfig(vocab_size=vocab_size, embedding_size=64, hidden_size=256,
                         num_hidden_layers=3, embed_p=0.02, input_p=0.25, weight_p=0.2,
                         hidden_p=0.15, output_p=0.1, initrange=0.5)


FAMILY = registry.families.register("ulmfit", registry.network_family(
    "ulmfit", AwdLstm, AwdLstmConfig, load_awd_lstm_config, demo_config, CONFIG_FILE_NAME,
    has_pooler=False))
# run_classifier's --model_family=ulmfit (the AWD-LSTM with concat pooling).
from modeling.ulmfit import classification  # noqa: E402,F401  pylint: disable=g-import-not-at-top
