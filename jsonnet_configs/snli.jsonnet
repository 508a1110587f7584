// SNLI 1.0 (paper Sec. 4, Table 1: ESIM 88.0 -> 88.7 test accuracy; Tables 2-3 on dev).
// Model: ESIM (allennlp-models' esim; hyperparameters from its esim/esim_elmo configs: Adam 4e-4, clip 10,
// batch 32). Output ELMo sits on the input encoder's output ("at the output of the task RNN", Sec. 3.3), and
// the projection layer is sized from it (tasks/snli/esim_sized.py). See tasks/snli/README.md.
local elmo = import 'elmo.libsonnet';

local word_embedding = elmo.word_embedding(glove_dim=300, scratch_dim=elmo.size(300, 64, 8), glove_trainable=true);
local hidden = elmo.size(300, 64, 8);

local reader = {
  type: 'snli_checked',
  tokenizer: { type: 'spacy_blank_en' },
  token_indexers: elmo.indexers({ tokens: { type: 'single_id', lowercase_tokens: true } }),
};

// The paper's SNLI ELMo model (supplement A.3): "due to the increased number of parameters", l2 1e-4 on every
// recurrent and feed-forward weight matrix and 50 % dropout after the attention layer. SIZE paper, ELMo runs only;
// allennlp-models' esim_elmo (a simplified variant, its own header) has neither. See tasks/snli/README.md.
local paper_elmo_model = elmo.use_elmo && elmo.knobs.size == 'paper';
local weight_l2 = if paper_elmo_model then [
  ['.*weight_ih.*', { type: 'l2', alpha: 0.0001 }],
  ['.*weight_hh.*', { type: 'l2', alpha: 0.0001 }],
  ['.*linear_layers.*weight', { type: 'l2', alpha: 0.0001 }],
] else [];

local lstm(input_dim) = { type: 'lstm', input_size: input_dim, hidden_size: hidden, num_layers: 1, bidirectional: true };

elmo.experiment(reader,
                train='tasks/snli/sample_data/train.jsonl',
                dev='tasks/snli/sample_data/dev.jsonl',
                test='tasks/snli/sample_data/test.jsonl') + {
  model: {
    type: 'esim_sized',
    dropout: 0.5,
    attention_dropout: if paper_elmo_model then 0.5 else 0.0,
    // ELMo dropout 0 as esim_elmo: ESIM's variational dropout 0.5 on the embeddings covers it.
    text_field_embedder: { token_embedders: elmo.embedders({ tokens: word_embedding }, dropout=0.0) },
    encoder: elmo.output_encoder(elmo.input_sized(
      { type: 'lstm', hidden_size: hidden, num_layers: 1, bidirectional: true }, word_embedding.embedding_dim)),
    matrix_attention: { type: 'dot_product' },
    projection_feedforward: { hidden_dims: hidden, num_layers: 1, activations: 'relu' },
    inference_encoder: lstm(hidden),
    output_feedforward: { input_dim: 8 * hidden, num_layers: 1, hidden_dims: hidden, activations: 'relu', dropout: 0.5 },
    output_logit: { input_dim: hidden, num_layers: 1, hidden_dims: 3, activations: 'linear' },
    initializer: {
      regexes: [
        ['.*linear_layers.*weight', { type: 'xavier_uniform' }],
        ['.*linear_layers.*bias', { type: 'constant', val: 0 }],
        ['.*weight_ih.*', { type: 'xavier_uniform' }],
        ['.*weight_hh.*', { type: 'orthogonal' }],
        ['.*bias_ih.*', { type: 'constant', val: 0 }],
        ['.*bias_hh.*', { type: 'lstm_hidden_bias' }],
      ],
    },
  } + elmo.model_common_plus(weight_l2),
  data_loader+: {
    batch_sampler: { type: 'bucket', batch_size: elmo.size(32, 32, 4) },
  },
  trainer: elmo.trainer({
    optimizer: { type: 'adam', lr: 0.0004 },
    grad_norm: 10.0,
    validation_metric: '+accuracy',
    patience: 5,
    learning_rate_scheduler: { type: 'reduce_on_plateau_compat', factor: 0.5, mode: 'max', patience: 0 },
  }, default_epochs=75),
}
