// Coreference on OntoNotes 5.0 CoNLL-2012 (paper Sec. 4, Table 1: baseline 67.2 -> ELMo 70.4 test average F1 of
// MUC, B3 and CEAF-phi4). Model: Lee et al. (2017)'s end-to-end span model (allennlp-models' `coref`, through our
// `coref_sized` which sizes the span scorers for ELMo): word + char-CNN embeddings -> 1-layer biLSTM (200 per
// direction) -> span representations (endpoints, attention head, width) -> mention pruning (spans_per_word) ->
// antecedent scoring over the max_antecedents previous spans. Hyperparameters from Lee et al. (2017) Sec. 7.1 and
// allennlp-models' coref config, except max_antecedents (50 instead of 250, for memory with ELMo; same value for
// the baseline, so the ELMo gain is measured like for like) -- see tasks/coref/README.md.
// ELMo: input placement = [x; ELMo] into the biLSTM (the paper's best for coref); output placement = [h; ELMo'] on
// the biLSTM's output, which feeds the span endpoints.
local elmo = import 'elmo.libsonnet';

// Lee et al.: 300-d GloVe (fixed) + 8-d character embeddings, CNN with 50 filters each of widths 3, 4, 5.
local word_embedding = elmo.word_embedding(glove_dim=300, scratch_dim=elmo.size(300, 50, 8));
local char_embedding_dim = elmo.size(8, 8, 4);
local filters_per_width = elmo.size(50, 16, 4);
local char_widths = [3, 4, 5];
local hidden = elmo.size(200, 64, 8);
local feedforward_dim = elmo.size(150, 64, 8);
local feature_size = elmo.size(20, 20, 4);
local max_span_width = 10;

local reader(max_sentences) = {
  type: 'coref_conll2012',
  max_span_width: max_span_width,
  max_sentences: max_sentences,
  token_indexers: elmo.indexers({
    tokens: { type: 'single_id', lowercase_tokens: false },
    token_characters: { type: 'characters', min_padding_length: 5 },
  }),
};

local scorer_feedforward = {
  num_layers: 2,
  hidden_dims: feedforward_dim,
  activations: 'relu',
  dropout: 0.2,
};

// Training documents are cut to their first 50 sentences (allennlp-models; Lee et al. cut at random offsets);
// dev and test documents are read whole.
elmo.experiment(reader(max_sentences=50),
                train='tasks/coref/sample_data/train',
                dev='tasks/coref/sample_data/dev',
                test='tasks/coref/sample_data/test',
                validation_reader=reader(max_sentences=null)) + {
  model: {
    type: 'coref_sized',
    text_field_embedder: {
      token_embedders: elmo.embedders({
        tokens: word_embedding,
        token_characters: {
          type: 'character_encoding',
          embedding: { embedding_dim: char_embedding_dim },
          encoder: {
            type: 'cnn',
            embedding_dim: char_embedding_dim,
            num_filters: filters_per_width,
            ngram_filter_sizes: char_widths,
            conv_layer_activation: 'relu',
          },
        },
      }, dropout=0.5),
    },
    context_layer: elmo.output_encoder(elmo.input_sized({
      type: 'lstm',
      bidirectional: true,
      hidden_size: hidden,
      num_layers: 1,
    }, word_embedding.embedding_dim + filters_per_width * std.length(char_widths))),
    mention_feedforward: scorer_feedforward,
    antecedent_feedforward: scorer_feedforward,
    feature_size: feature_size,
    max_span_width: max_span_width,
    spans_per_word: 0.4,
    max_antecedents: 50,
    lexical_dropout: 0.5,
  } + elmo.model_common,
  data_loader: { batch_size: 1 },  // one document per batch (Lee et al.)
  trainer: elmo.trainer({
    optimizer: { type: 'adam', lr: 0.001 },
    grad_norm: 5.0,
    learning_rate_scheduler: { type: 'reduce_on_plateau_compat', factor: 0.5, mode: 'max', patience: 2 },
    validation_metric: '+coref_f1',
    patience: 10,
  }, default_epochs=150),
}
