// SQuAD 1.1 (paper Sec. 4, Table 1: 81.1 -> 85.8 test F1; Tables 2-3 on dev).
// Model: BiDAF + self-attention as in Clark & Gardner 2018, the paper's baseline (tasks/squad/bidaf_self_attention.py):
// GloVe 840B-300d (fixed) + char-CNN (20-d chars, 100 filters of width 5), bi-GRUs, linear layers 2 x GRU size,
// variational dropout 0.2, Adadelta lr 1 (paper size: TF's rho 0.95, eps 1e-8), batch 45, EMA 0.999 of the weights.
// SIZE paper follows document-qa, the code behind the paper's numbers: GRU 100 for the baseline
// (docqa/scripts/ablate_squad.py:42 get_model(50, 100, ...), 26 epochs :48) and GRU 90 with ELMo
// (docqa/elmo/ablate_elmo_model.py:27 --dim 90, 24 epochs :40). Output ELMo wraps the shared question/passage
// encoder. Metric: official v1.1 EM/F1. Settings and sources: tasks/squad/README.md.
local elmo = import 'elmo.libsonnet';

// document-qa: cased words, GloVe vector of the word else of its lowercase form else zero, fixed
// (tasks/squad/glove_fallback.py). Without GLOVE_PATH: lowercased words trained from scratch; WORD_VECTORS=false: none
// (the character CNN stays: the supplement's ablation removes GloVe only).
local glove = elmo.knobs.glove_path != '' && elmo.knobs.word_vectors;
local word_embedding =
  if glove then { type: 'glove_cased_fallback', embedding_dim: 300, pretrained_file: elmo.knobs.glove_path }
  else elmo.word_embedding(glove_dim=300, scratch_dim=elmo.size(300, 64, 8));
local char_dim = elmo.size(20, 16, 4);
local char_filters = elmo.size(100, 32, 8);
local gru_dim = elmo.size(if elmo.use_elmo then 90 else 100, 32, 8);
local linear_dim = elmo.size(2 * gru_dim, 64, 16);  // FullyConnected(dim * 2) in document-qa

local reader(train) = {
  type: 'squad1_checked',
  tokenizer: { type: 'spacy_blank_en' },
  token_indexers: elmo.indexers({
    tokens: { type: 'single_id', lowercase_tokens: !glove },
    token_characters: { type: 'characters', min_padding_length: 5 },
  }),
} + (if train then { passage_length_limit: 400, skip_impossible_questions: true } else {});

// unpacked_gru: allennlp's 'gru' with a backward linear in the passage length on CPU (tasks/unpacked_rnn.py).
local bigru(input_dim) = { type: 'unpacked_gru', input_size: input_dim, hidden_size: gru_dim, bidirectional: true };

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
      { type: 'unpacked_gru', hidden_size: gru_dim, bidirectional: true }, word_embedding.embedding_dim + char_filters)),
    self_attention_encoder: bigru(linear_dim),
    span_start_encoder: bigru(linear_dim),
    span_end_encoder: bigru(linear_dim + 2 * gru_dim),
    linear_dim: linear_dim,
    dropout: 0.2,
    max_span_length: 17,
  } + elmo.model_common,
  data_loader+: {
    batch_sampler: { type: 'bucket', batch_size: elmo.size(45, 32, 4) },
  },
  trainer: elmo.trainer({
    // tf.train.AdadeltaOptimizer(learning_rate=1.0) (docqa/elmo/ablate_elmo_model.py:38): TF's defaults rho 0.95,
    // epsilon 1e-8, not torch's 0.9 / 1e-6. No gradient clipping, no weight decay (docqa/trainer.py:156-195).
    // small/tiny keep torch's defaults: with eps 1e-8 the first steps are ~10x smaller and the few epochs of a
    // CPU run barely move the loss.
    optimizer: { type: 'adadelta', lr: 1.0 } + elmo.size({ rho: 0.95, eps: 1e-8 }, {}, {}),
    moving_average: { type: 'exponential_resumable', decay: 0.999 },  // allennlp's 'exponential', resumable
    validation_metric: '+f1',
    // document-qa trains a fixed number of epochs and keeps the best dev F1 (ablate_elmo_model.py:41): no early stop.
    // small: patience 5 (allennlp-models' esim.jsonnet's) ends a converged run early, under the cap of the small profile
    // (25: a cap of 15 left the baseline still gaining 0.6 F1 per epoch, docs/small_scale.md).
    patience: elmo.size(null, 5, 10),
  }, default_epochs=elmo.size(if elmo.use_elmo then 24 else 26, 25, 25)),
}
