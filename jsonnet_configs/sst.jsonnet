// SST-5, fine-grained (paper Sec. 4, Table 1: BCN 51.4 -> 54.7 test accuracy).
// Model: BCN (allennlp-models' bcn; hyperparameters from its bcn elmo config: Adam 1e-3, batch 100, clip 5,
// 40 epochs, patience 5). ELMo goes
// through our text field embedder (input) and an elmo_output wrapper around the integrator (output,
// "at the output of the task RNN", Sec. 3.3), not through BCN's own elmo argument (tasks/sst/bcn_sized.py).
// Training uses every labelled phrase of the training trees, dev/test the sentence (root) labels only, as
// allennlp-models' SST configs. See tasks/sst/README.md.
local elmo = import 'elmo.libsonnet';

local word_embedding = elmo.word_embedding(glove_dim=300, scratch_dim=elmo.size(300, 64, 8));
local hidden = elmo.size(300, 64, 8);

local reader(phrases) = {
  type: 'sst_checked',
  granularity: '5-class',
  use_subtrees: phrases,
  token_indexers: elmo.indexers({ tokens: { type: 'single_id' } }),  // cased, as allennlp-models' SST configs
};

elmo.experiment(reader(std.parseJson(std.extVar('SST_PHRASES'))),
                train='tasks/sst/sample_data/train.txt',
                dev='tasks/sst/sample_data/dev.txt',
                test='tasks/sst/sample_data/test.txt',
                validation_reader=reader(false)) + {
  model: {
    type: 'bcn_sized',
    // ELMo dropout 0 as allennlp-models' bcn elmo config: embedding_dropout 0.5 covers it.
    text_field_embedder: { token_embedders: elmo.embedders({ tokens: word_embedding }, dropout=0.0) },
    embedding_dropout: 0.5,
    pre_encode_feedforward: { num_layers: 1, hidden_dims: [hidden], activations: ['relu'], dropout: [0.25] },
    encoder: { type: 'lstm', input_size: hidden, hidden_size: hidden, num_layers: 1, bidirectional: true },
    integrator: elmo.output_encoder(
      { type: 'lstm', input_size: 6 * hidden, hidden_size: hidden, num_layers: 1, bidirectional: true }),
    integrator_dropout: 0.1,
    output_layer: {
      num_layers: 3,
      output_dims: [4 * hidden, 2 * hidden, 5],
      pool_sizes: 4,
      dropout: [0.2, 0.3, 0.0],
    },
  } + elmo.model_common,
  data_loader+: {
    batch_sampler: { type: 'bucket', batch_size: elmo.size(100, 32, 8) },
  },
  trainer: elmo.trainer({
    optimizer: { type: 'adam', lr: 0.001 },
    validation_metric: '+accuracy',
    patience: 5,
    grad_norm: 5.0,
  }, default_epochs=40),
}
