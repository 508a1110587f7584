// SQuAD 1.1 (paper Sec. 4, Table 1: 81.1 -> 85.8 test F1; Tables 2-3 on dev).
// Model: BiDAF + self-attention as in Clark & Gardner 2018, the paper's baseline (tasks/squad/bidaf_self_attention.py):
// GloVe 300 (fixed) + char-CNN (20-d chars, 100 filters of width 5), GRUs of 100 per direction, linear layers 200,
// variational dropout 0.2, Adadelta lr 1, batch 45, EMA 0.999 of the weights (C&G 2018 Sec. 5; document-qa).
// Output ELMo wraps the shared question/passage encoder. Metric: official v1.1 EM/F1. See tasks/squad/README.md.
local elmo = import 'elmo.libsonnet';

local word_embedding = elmo.word_embedding(glove_dim=300, scratch_dim=elmo.size(300, 64, 8));
local char_dim = elmo.size(20, 16, 4);
local char_filters = elmo.size(100, 32, 8);
local gru_dim = elmo.size(100, 32, 8);
local linear_dim = elmo.size(200, 64, 16);

local reader(train) = {
  type: 'squad1_checked',
  tokenizer: { type: 'spacy_blank_en' },
  token_indexers: elmo.indexers({
    tokens: { type: 'single_id', lowercase_tokens: true },
    token_characters: { type: 'characters', min_padding_length: 5 },
  }),
} + (if train then { passage_length_limit: 400, skip_impossible_questions: true } else {});

local bigru(input_dim) = { type: 'gru', input_size: input_dim, hidden_size: gru_dim, bidirectional: true };

elmo.experiment(reader(true),
                train='tasks/squad/sample_data/train.json',
                dev='tasks/squad/sample_data/dev.json',
                validation_reader=reader(false)) + {
  model: {
    type: 'bidaf_self_attention',
    text_field_embedder: {
      token_embedders: elmo.embedders({
        tokens: word_embedding,
        token_characters: {
          type: 'character_encoding',
          embedding: { embedding_dim: char_dim , vocab_namespace: 'token_characters' },
          encoder: { type: 'cnn', embedding_dim: char_dim, num_filters: char_filters, ngram_filter_sizes: [5] },
        },
      }, dropout=0.5),
    },
    phrase_encoder: elmo.output_encoder(elmo.input_sized(
      { type: 'gru', hidden_size: gru_dim, bidirectional: true }, word_embedding.embedding_dim + char_filters)),
    self_attention_encoder: bigru(linear_dim),
    span_start_encoder: bigru(linear_dim),
    span_end_encoder: bigru(linear_dim + 2 * gru_dim),
    linear_dim: linear_dim,
    dropout: 0.2,
    max_span_length: 17,
  } + elmo.model_common,
  data_loader: {
    batch_sampler: { type: 'bucket', batch_size: elmo.size(45, 16, 4) },
  },
  trainer: elmo.trainer({
    optimizer: { type: 'adadelta', lr: 1.0 },
    moving_average: { type: 'exponential', decay: 0.999 },
    validation_metric: '+f1',
    patience: 10,
  }, default_epochs=25),
}
