// SRL on OntoNotes 5.0 CoNLL-2012 (paper Sec. 4, Table 1: baseline 81.4 -> ELMo 84.6 test F1; Tables 2-3 on dev).
// Model: He et al. (2017): word embedding + verb-indicator embedding -> 8-layer alternating-direction LSTM with
// highway connections and recurrent dropout 0.1 -> per-token BIO tags, Viterbi decoding with BIO constraints
// (allennlp-models' `srl` model, encoder `alternating_lstm`). Output ELMo sits on top of the LSTM stack (Sec. 3.3).
// Optimiser as He et al. / allennlp-models' srl_elmo: Adadelta (rho 0.95, eps 1e-6), batch 80, grad clip 1.0;
// ELMo dropout 0.1 as srl_elmo. SIZE=paper: up to 500 epochs with patience 200 and an orthogonal tag projection, as
// srl_elmo.jsonnet:27,59,61 (allennlp-models). Metric: the official srl-eval.pl F1 (perl). See tasks/srl/README.md.
local elmo = import 'elmo.libsonnet';

// He et al. use 100-d GloVe, updated during training.
local word_embedding = elmo.word_embedding(glove_dim=100, scratch_dim=elmo.size(100, 50, 8), glove_trainable=true);
local verb_indicator_dim = elmo.size(100, 16, 4);
local hidden = elmo.size(300, 64, 8);
local num_layers = elmo.size(8, 4, 2);
local paper = elmo.knobs.size == 'paper';

local reader = {
  type: 'srl_conll2012',
  token_indexers: elmo.indexers({
    tokens: { type: 'single_id', lowercase_tokens: true },
  }),
};

elmo.experiment(reader,
                train='tasks/srl/sample_data/train',
                dev='tasks/srl/sample_data/dev',
                test='tasks/srl/sample_data/test') + {
  model: {
    type: 'srl',
    text_field_embedder: {
      token_embedders: elmo.embedders({ tokens: word_embedding }, dropout=0.1),
    },
    binary_feature_dim: verb_indicator_dim,
    encoder: elmo.output_encoder(elmo.input_sized({
      type: 'alternating_lstm',
      hidden_size: hidden,
      num_layers: num_layers,
      recurrent_dropout_probability: 0.1,
      use_highway: true,
    }, word_embedding.embedding_dim + verb_indicator_dim)),
  } + (if paper then {
    // allennlp-models srl.jsonnet:19-23 and srl_elmo.jsonnet:25-29 (He et al. 2017 initialise orthogonally)
    initializer: { regexes: [['tag_projection_layer.*weight', { type: 'orthogonal' }]] },
  } else {}) + elmo.model_common,
  data_loader+: {
    batch_sampler: { type: 'bucket', batch_size: elmo.size(80, 32, 4), sorting_keys: ['tokens'] },
  },
  trainer: elmo.trainer({
    optimizer: { type: 'adadelta', rho: 0.95, eps: 1e-6 },
    grad_clipping: 1.0,
    validation_metric: '+f1-measure-overall',
    // srl_elmo: 500 epochs, patience 200 (allennlp-models' baseline srl.jsonnet:44 has 20, which stops the slowly
    // converging 8-layer model early); He et al.'s deep_srl trains all 500 (config/srl_config.json:19).
    patience: elmo.size(200, 20, 20),
  }, default_epochs=500),
}
